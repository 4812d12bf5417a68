// StatsLogger: the periodic throughput line, as vLLM's LoggingStatLogger:
//   "Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s,
//    Running: R reqs, Swapped: S reqs, Pending: P reqs, GPU KV cache usage: U%,
//    CPU KV cache usage: C%" (vLLM v0's; C: the swap space, --swap-space).
// On the CPU backend the device cache is "CPU KV cache usage" and the swap
// space "Swap space usage". Then, when prefix-cache lookups happened, the
// hit rate, and, when requests produced tokens
// since the previous line, by ", Mean TTFT: A ms, Mean ITL: B ms" (means of
// the time-to-first-token / inter-token-latency observations since then;
// "n/a" for one without observations). One spdlog info line every interval_s
// seconds while the engine is busy; throughputs are averaged over the time
// since the previous line.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/stats.h"

namespace pagoda {

class StatsLogger {
 public:
  using Clock = std::chrono::steady_clock;
  // device_name: "GPU", "CPU". interval_s <= 0 disables logging.
  StatsLogger(double interval_s, std::string device_name, Clock::time_point now = Clock::now());

  // Called after each step. Returns the line logged (empty if none was due).
  std::string maybe_log(const EngineStats& stats, Clock::time_point now = Clock::now());

  // The line for `stats` over `elapsed_s` seconds since `last` (pure).
  static std::string format(const EngineStats& stats, const EngineStats& last, double elapsed_s,
                            const std::string& device_name);

 private:
  double interval_s_;
  std::string device_name_;
  Clock::time_point last_time_;
  EngineStats last_;
};

}  // namespace pagoda
