#include "engine/latency_tracker.h"

#include <iterator>

namespace pagoda {

void LatencyTracker::on_token(const std::string& id, Clock::time_point arrival, Clock::time_point now,
                              bool finished, EngineStats& stats) {
  auto it = last_token_.find(id);
  if (it == last_token_.end()) {
    stats.time_to_first_token.observe(std::chrono::duration<double>(now - arrival).count());
    if (!finished) last_token_.emplace(id, now);
  } else {
    stats.inter_token_latency.observe(std::chrono::duration<double>(now - it->second).count());
    it->second = now;
  }
  if (finished) {
    stats.e2e_request_latency.observe(std::chrono::duration<double>(now - arrival).count());
    last_token_.erase(id);
  }
}

void LatencyTracker::prune(size_t num_live, const std::function<bool(const std::string&)>& alive) {
  if (last_token_.size() <= num_live + 64) return;
  for (auto it = last_token_.begin(); it != last_token_.end();)
    it = alive(it->first) ? std::next(it) : last_token_.erase(it);
}

}  // namespace pagoda
