// LatencyTracker: the engine thread's per-request token timing, feeding the
// EngineStats latency histograms (vLLM's time_to_first_token_seconds,
// inter_token_latency_seconds, e2e_request_latency_seconds). Times are the
// engine's: a token counts when the step that sampled it has been
// postprocessed (its delta pushed), not when a client reads it.
// Engine thread only.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>

#include "engine/stats.h"

namespace pagoda {

class LatencyTracker {
 public:
  using Clock = std::chrono::steady_clock;
  // A token of request `id` (arrived at `arrival`) was sampled at `now`.
  // The first one observes TTFT (now - arrival), later ones ITL (now - the
  // previous token's time); `finished` (stop/length) also observes the
  // end-to-end latency (now - arrival) and forgets the request.
  void on_token(const std::string& id, Clock::time_point arrival, Clock::time_point now, bool finished,
                EngineStats& stats);
  // The request ended without a token (abort): forget it.
  void forget(const std::string& id) { last_token_.erase(id); }
  // Forgets every request `alive` says is gone (requests that ended outside
  // postprocess, e.g. for lack of KV capacity). Cheap to call each step:
  // only sweeps when more requests are tracked than `num_live` + 64.
  void prune(size_t num_live, const std::function<bool(const std::string&)>& alive);
  size_t size() const { return last_token_.size(); }

 private:
  std::unordered_map<std::string, Clock::time_point> last_token_;
};

}  // namespace pagoda
