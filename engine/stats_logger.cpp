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
  return fmt::format(
      "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
      "Running: {} reqs, Swapped: {} reqs, Pending: {} reqs, {} KV cache usage: {:.1f}%",
      prompt_tps, gen_tps, s.num_running, s.num_swapped, s.num_waiting, device_name,
      s.kv_cache_usage() * 100.0);
}

std::string StatsLogger::maybe_log(const EngineStats& stats, Clock::time_point now) {
  if (interval_s_ <= 0) return {};
  double elapsed = std::chrono::duration<double>(now - last_time_).count();
  if (elapsed < interval_s_) return {};
  bool busy = stats.num_running + stats.num_waiting > 0 ||
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
