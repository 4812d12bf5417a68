// EngineStats: the snapshot the engine thread publishes after each step, read
// by /metrics and the periodic log line (vLLM's Stats / metric names).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pagoda {

// A Prometheus histogram of latencies in seconds: per-bucket counts for the
// upper bounds `bounds` (ascending) plus +Inf (counts.size() ==
// bounds.size() + 1, NOT cumulative), the sum and the count of observations.
// Bucket bounds are vLLM's (vllm/v1/metrics/loggers.py).
struct LatencyHistogram {
  std::vector<double> bounds;
  std::vector<int64_t> counts;
  double sum = 0.0;
  int64_t count = 0;

  explicit LatencyHistogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double seconds) {
    size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    counts[i]++;
    sum += seconds;
    count++;
  }
  static LatencyHistogram time_to_first_token() {
    return LatencyHistogram({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0});
  }
  static LatencyHistogram inter_token_latency() {
    return LatencyHistogram({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                             10.0, 20.0, 40.0, 80.0});
  }
  static LatencyHistogram e2e_request_latency() {
    return LatencyHistogram({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                             120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0});
  }
};

struct EngineStats {
  int64_t num_running = 0;   // sequences in the running batch
  int64_t num_waiting = 0;   // pending: admitted to the engine, not yet running
  int64_t num_swapped = 0;   // sequences preempted by swap, their KV in host blocks
  int64_t num_preemptions_total = 0;  // by recompute or by swap
  // Preemptions by swap: sequences swapped out and back in since start, and
  // swaps that recomputed instead because the swap space was full.
  int64_t num_swap_outs_total = 0;
  int64_t num_swap_ins_total = 0;
  int64_t num_swap_fallbacks_total = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  // The swap space's host blocks (--swap-space; vLLM v0's CPU blocks).
  int64_t cpu_kv_blocks_total = 0;
  int64_t cpu_kv_blocks_used = 0;
  int64_t prompt_tokens_total = 0;      // prompt tokens of requests that got a first token, each once
  int64_t generation_tokens_total = 0;  // sampled tokens since start
  int64_t steps_total = 0;
  // Prefix caching: tokens of admitted sequences looked up / found in the
  // cache (vLLM's vllm:prefix_cache_queries / vllm:prefix_cache_hits).
  int64_t prefix_cache_queries_total = 0;
  int64_t prefix_cache_hits_total = 0;
  std::map<std::string, int64_t> requests_finished_total;  // by finish reason
  // Engine-side latencies (engine/latency_tracker.h), seconds: arrival →
  // first sampled token; between consecutive tokens of a request; arrival →
  // last token of a request that finished by stop/length.
  LatencyHistogram time_to_first_token = LatencyHistogram::time_to_first_token();
  LatencyHistogram inter_token_latency = LatencyHistogram::inter_token_latency();
  LatencyHistogram e2e_request_latency = LatencyHistogram::e2e_request_latency();
  double kv_cache_usage() const {
    return kv_blocks_total ? static_cast<double>(kv_blocks_used) / kv_blocks_total : 0.0;
  }
  // Fraction of the swap space in use (vLLM v0's cpu_cache_usage); 0 without one.
  double cpu_cache_usage() const {
    return cpu_kv_blocks_total
               ? static_cast<double>(cpu_kv_blocks_used) / static_cast<double>(cpu_kv_blocks_total)
               : 0.0;
  }
};

}  // namespace pagoda
