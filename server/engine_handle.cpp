#include "server/engine_handle.h"

#include "engine/engine.h"
#include "engine/output_channel.h"

namespace pagoda {

void EngineAdapter::add_request(std::unique_ptr<GenerateRequest> request) {
  std::lock_guard<std::mutex> lock(add_mu_);
  if (running_.load()) return engine_.add_request(std::move(request));
  if (request) push_error(*request, "The server is shutting down", 503);
}

void EngineAdapter::set_running(bool r) {
  std::lock_guard<std::mutex> lock(add_mu_);
  running_.store(r);
}
void EngineAdapter::abort_request(const std::string& request_id) { engine_.abort_request(request_id); }
EngineStats EngineAdapter::stats() const { return engine_.stats(); }

}  // namespace pagoda
