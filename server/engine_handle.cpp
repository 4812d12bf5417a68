#include "server/engine_handle.h"

#include "engine/engine.h"

namespace pagoda {

void EngineAdapter::add_request(std::unique_ptr<GenerateRequest> request) {
  engine_.add_request(std::move(request));
}
void EngineAdapter::abort_request(const std::string& request_id) { engine_.abort_request(request_id); }
EngineStats EngineAdapter::stats() const { return engine_.stats(); }

}  // namespace pagoda
