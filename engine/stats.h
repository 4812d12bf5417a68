// EngineStats: the snapshot the engine thread publishes after each step, read
// by /metrics and the periodic log line (vLLM's Stats / metric names).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace pagoda {

struct EngineStats {
  int64_t num_running = 0;   // sequences in the running batch
  int64_t num_waiting = 0;   // pending: admitted to the engine, not yet running
  int64_t num_swapped = 0;   // preempted to CPU (always 0: recompute preemption)
  int64_t num_preemptions_total = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t prompt_tokens_total = 0;      // prefilled tokens since start
  int64_t generation_tokens_total = 0;  // sampled tokens since start
  int64_t steps_total = 0;
  std::map<std::string, int64_t> requests_finished_total;  // by finish reason
  double kv_cache_usage() const {
    return kv_blocks_total ? static_cast<double>(kv_blocks_used) / kv_blocks_total : 0.0;
  }
};

}  // namespace pagoda
