// LatencyTracker: the engine thread's per-request token timing, feeding the
// EngineStats latency histograms (vLLM's time_to_first_token_seconds,
// inter_token_latency_seconds, e2e_request_latency_seconds). Times are the
// engine's: a token counts when the step that sampled it has been
// postprocessed (its delta pushed), not when a client reads it.
//
// A request with n / best_of > 1 runs several sequences: its TTFT is
// observed once (its first token, whichever sequence sampled it), each
// sequence's later tokens observe ITL against that sequence's previous
// token, and the end-to-end latency is observed once, when the last
// sequence finishes. Engine thread only.
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/stats.h"

namespace pagoda {

// One finished request's engine-side timings, seconds from its arrival:
// to its first token (TTFT) and to its end (end-to-end latency), the
// values the request observed in the histograms.
struct RequestTimings {
  double ttft_s = 0.0;
  double e2e_s = 0.0;
};

class LatencyTracker {
 public:
  using Clock = std::chrono::steady_clock;
  // A token of sequence `seq_index` (in [0, best_of)) of request `id`
  // (arrived at `arrival`) was sampled at `now`. The request's first token
  // observes TTFT (now - arrival); a sequence's later tokens observe ITL
  // (now - that sequence's previous token). True for the request's first
  // token.
  bool on_token(const std::string& id, int seq_index, Clock::time_point arrival, Clock::time_point now,
                EngineStats& stats);
  // Every sequence of request `id` is done: observes the end-to-end latency
  // (now - arrival), forgets the request and returns its timings. Does
  // nothing for a request not tracked (already finished, or never sampled)
  // and returns nullopt, so calling it once per finished sequence of a step
  // observes the request once.
  std::optional<RequestTimings> finish(const std::string& id, Clock::time_point arrival,
                                       Clock::time_point now, EngineStats& stats);
  // The request ended without a token (abort): forget it.
  void forget(const std::string& id) { last_token_.erase(id); }
  // Forgets every request `alive` says is gone (requests that ended outside
  // postprocess, e.g. for lack of KV capacity). Cheap to call each step:
  // only sweeps when more requests are tracked than `num_live` + 64.
  void prune(size_t num_live, const std::function<bool(const std::string&)>& alive);
  size_t size() const { return last_token_.size(); }

 private:
  struct Tracked {
    Clock::time_point first;              // the request's first token
    std::vector<Clock::time_point> last;  // each sequence's previous token (epoch: none yet)
  };
  std::unordered_map<std::string, Tracked> last_token_;
};

}  // namespace pagoda
