#include "engine/stats_logger.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace pagoda {

StatsLogger::StatsLogger(double interval_s, std::string device_name, Clock::time_point now)
    : interval_s_(interval_s), device_name_(std::move(device_name)), last_time_(now) {}

std::string StatsLogger::format(const EngineStats& s, const EngineStats& last, double elapsed_s,
                                const std::string& device_name) {
  double dt = elapsed_s > 0 ? elapsed_s : 1.0;
  double prompt_tps = static_cast<double>(s.prompt_tokens_total - last.prompt_tokens_total) / dt;
  double gen_tps = static_cast<double>(s.generation_tokens_total - last.generation_tokens_total) / dt;
  std::string line = fmt::format(
      "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
      "Running: {} reqs, Swapped: {} reqs, Pending: {} reqs, {} KV cache usage: {:.1f}%, {}: "
      "{:.1f}%",
      prompt_tps, gen_tps, s.num_running, s.num_swapped, s.num_waiting, device_name,
      s.kv_cache_usage() * 100.0,
      // vLLM v0's "CPU KV cache usage" (the swap space); the CPU backend's
      // device cache is already "CPU KV cache".
      device_name == "CPU" ? "Swap space usage" : "CPU KV cache usage",
      s.cpu_cache_usage() * 100.0);
  // Over the lookups since the previous line, as vLLM v1's recent hit rate.
  if (const int64_t q = s.prefix_cache_queries_total - last.prefix_cache_queries_total; q > 0)
    line += fmt::format(
        ", Prefix cache hit rate: {:.1f}%",
        100.0 * static_cast<double>(s.prefix_cache_hits_total - last.prefix_cache_hits_total) /
            static_cast<double>(q));
  // Means over the observations since the previous line (when there are any).
  auto mean_ms = [](const LatencyHistogram& now, const LatencyHistogram& before) {
    int64_t n = now.count - before.count;
    return n > 0 ? fmt::format("{:.1f} ms", (now.sum - before.sum) / static_cast<double>(n) * 1000.0)
                 : std::string("n/a");
  };
  if (s.time_to_first_token.count != last.time_to_first_token.count ||
      s.inter_token_latency.count != last.inter_token_latency.count)
    line += fmt::format(", Mean TTFT: {}, Mean ITL: {}", mean_ms(s.time_to_first_token, last.time_to_first_token),
                        mean_ms(s.inter_token_latency, last.inter_token_latency));
  return line;
}

std::string StatsLogger::maybe_log(const EngineStats& stats, Clock::time_point now) {
  if (interval_s_ <= 0) return {};
  double elapsed = std::chrono::duration<double>(now - last_time_).count();
  if (elapsed < interval_s_) return {};
  bool busy = stats.num_running + stats.num_waiting + stats.num_swapped > 0 ||
              stats.prompt_tokens_total != last_.prompt_tokens_total ||
              stats.generation_tokens_total != last_.generation_tokens_total;
  std::string line;
  if (busy) {
    line = format(stats, last_, elapsed, device_name_);
    spdlog::info("{}", line);
  }
  last_ = stats;
  last_time_ = now;
  return line;
}

}  // namespace pagoda
