#include "server/engine_handle.h"

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/output_channel.h"

namespace pagoda {

void EngineAdapter::add_request(std::unique_ptr<GenerateRequest> request) {
  std::lock_guard<std::mutex> lock(add_mu_);
  if (running_.load()) return engine_.add_request(std::move(request));
  if (request) push_error(*request, "The server is shutting down", 503);
}

Admission EngineAdapter::add_requests(std::vector<std::unique_ptr<GenerateRequest>>& requests) {
  std::lock_guard<std::mutex> lock(add_mu_);
  if (running_.load()) return engine_.try_add_requests(requests);
  return Admission::kShuttingDown;
}

void EngineAdapter::abort_requests(std::vector<std::string> request_ids) {
  engine_.abort_requests(std::move(request_ids));
}

EngineHealth EngineAdapter::health() const {
  if (!running_.load())
    return {false, "The engine is not taking requests (starting up or shutting down)"};
  const EngineHeartbeat h = engine_.heartbeat();
  const auto now = std::chrono::steady_clock::now();
  if (hang_timeout_.count() > 0 && h.stalled(now, hang_timeout_)) {
    const auto since = h.step_began ? *h.step_began : h.last_step_end;
    return {false,
            fmt::format(
                "The engine has not completed a step for {:.1f} s (--engine-hang-timeout {:.1f} s)",
                std::chrono::duration<double>(now - since).count(),
                std::chrono::duration<double>(hang_timeout_).count())};
  }
  const int64_t limit = engine_.config().max_num_waiting_requests;
  if (limit > 0 && h.num_waiting >= limit)
    return {false,
            fmt::format(
                "The server is overloaded: {} requests are waiting (--max-num-waiting-requests {})",
                h.num_waiting, limit)};
  return {};
}

int64_t EngineAdapter::max_num_waiting_requests() const {
  return engine_.config().max_num_waiting_requests;
}

void EngineAdapter::set_running(bool r) {
  std::lock_guard<std::mutex> lock(add_mu_);
  running_.store(r);
}
void EngineAdapter::abort_request(const std::string& request_id) { engine_.abort_request(request_id); }
EngineStats EngineAdapter::stats() const { return engine_.stats(); }

}  // namespace pagoda
