#include "server/version.h"

namespace pagoda {
std::string pagoda_version() { return PAGODA_VERSION; }
}  // namespace pagoda
