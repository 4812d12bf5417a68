// Build identity reported by GET /version and `pagoda --version`.
#pragma once
#include <string>

namespace pagoda {
// "0.1.0" (the CMake project version).
std::string pagoda_version();
}  // namespace pagoda
