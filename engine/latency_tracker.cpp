#include "engine/latency_tracker.h"

#include <iterator>

namespace pagoda {

bool LatencyTracker::on_token(const std::string& id, int seq_index, Clock::time_point arrival,
                              Clock::time_point now, EngineStats& stats) {
  const size_t i = seq_index > 0 ? static_cast<size_t>(seq_index) : 0;
  auto [it, first] = last_token_.try_emplace(id);
  if (first) {
    stats.time_to_first_token.observe(std::chrono::duration<double>(now - arrival).count());
    it->second.first = now;
  }
  std::vector<Clock::time_point>& last = it->second.last;
  if (last.size() <= i) last.resize(i + 1);
  if (last[i] != Clock::time_point{})
    stats.inter_token_latency.observe(std::chrono::duration<double>(now - last[i]).count());
  last[i] = now;
  return first;
}

std::optional<RequestTimings> LatencyTracker::finish(const std::string& id,
                                                     Clock::time_point arrival,
                                                     Clock::time_point now, EngineStats& stats) {
  auto it = last_token_.find(id);
  if (it == last_token_.end()) return std::nullopt;
  RequestTimings t;
  t.ttft_s = std::chrono::duration<double>(it->second.first - arrival).count();
  t.e2e_s = std::chrono::duration<double>(now - arrival).count();
  last_token_.erase(it);
  stats.e2e_request_latency.observe(t.e2e_s);
  return t;
}

void LatencyTracker::prune(size_t num_live, const std::function<bool(const std::string&)>& alive) {
  if (last_token_.size() <= num_live + 64) return;
  for (auto it = last_token_.begin(); it != last_token_.end();)
    it = alive(it->first) ? std::next(it) : last_token_.erase(it);
}

}  // namespace pagoda
