#include "engine/stats_logger.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(StatsLogger, FormatsVllmsLine) {
  EngineStats last, now;
  last.prompt_tokens_total = 100;
  last.generation_tokens_total = 50;
  now.prompt_tokens_total = 600;       // +500 in 5 s
  now.generation_tokens_total = 300;   // +250 in 5 s
  now.num_running = 3;
  now.num_waiting = 2;
  now.kv_blocks_total = 200;
  now.kv_blocks_used = 50;
  EXPECT_EQ(StatsLogger::format(now, last, 5.0, "GPU"),
            "Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: 50.0 tokens/s, "
            "Running: 3 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 25.0%, "
            "CPU KV cache usage: 0.0%");
}

TEST(StatsLogger, CountsSwappedRequestsAndTheSwapSpace) {
  EngineStats last, now;
  now.num_running = 2;
  now.num_swapped = 4;
  now.num_waiting = 1;
  now.kv_blocks_total = 100;
  now.kv_blocks_used = 100;
  now.cpu_kv_blocks_total = 400;
  now.cpu_kv_blocks_used = 50;
  EXPECT_EQ(StatsLogger::format(now, last, 5.0, "GPU"),
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
            "Running: 2 reqs, Swapped: 4 reqs, Pending: 1 reqs, GPU KV cache usage: 100.0%, "
            "CPU KV cache usage: 12.5%");
  // On the CPU backend the device cache is the "CPU KV cache".
  const std::string cpu = StatsLogger::format(now, last, 5.0, "CPU");
  EXPECT_NE(cpu.find("CPU KV cache usage: 100.0%, Swap space usage: 12.5%"), std::string::npos)
      << cpu;
  // Only swapped requests left: still busy, so the line is logged.
  auto t0 = StatsLogger::Clock::time_point{};
  StatsLogger log(5.0, "GPU", t0);
  EngineStats swapped_only;
  swapped_only.num_swapped = 1;
  EXPECT_NE(log.maybe_log(swapped_only, t0 + std::chrono::seconds(5)), "");
}

TEST(StatsLogger, LogsOncePerIntervalAndOnlyWhileBusy) {
  using namespace std::chrono;
  auto t0 = StatsLogger::Clock::time_point{};
  StatsLogger log(5.0, "CPU", t0);
  EngineStats s;
  s.kv_blocks_total = 10;
  s.num_running = 1;
  s.generation_tokens_total = 40;
  EXPECT_EQ(log.maybe_log(s, t0 + seconds(2)), "");  // not due
  std::string line = log.maybe_log(s, t0 + seconds(5));
  EXPECT_NE(line.find("Avg generation throughput: 8.0 tokens/s"), std::string::npos) << line;
  EXPECT_NE(line.find("CPU KV cache usage: 0.0%"), std::string::npos) << line;
  EXPECT_EQ(log.maybe_log(s, t0 + seconds(7)), "");  // 2 s after the last line
  EngineStats idle = s;
  idle.num_running = 0;
  EXPECT_EQ(log.maybe_log(idle, t0 + seconds(20)), "");  // idle: silent
  StatsLogger off(0.0, "CPU", t0);
  EXPECT_EQ(off.maybe_log(s, t0 + seconds(100)), "");
}

TEST(StatsLogger, AppendsMeanTtftAndItlSinceTheLastLine) {
  EngineStats last, now;
  last.time_to_first_token.observe(10.0);  // before the interval: excluded
  now = last;
  now.time_to_first_token.observe(0.020);
  now.time_to_first_token.observe(0.040);  // mean 30 ms
  now.inter_token_latency.observe(0.004);
  now.inter_token_latency.observe(0.006);
  now.inter_token_latency.observe(0.008);  // mean 6 ms
  std::string line = StatsLogger::format(now, last, 5.0, "CPU");
  EXPECT_NE(line.find(", Mean TTFT: 30.0 ms, Mean ITL: 6.0 ms"), std::string::npos) << line;
  EngineStats only_itl = now;
  only_itl.inter_token_latency.observe(0.010);
  line = StatsLogger::format(only_itl, now, 5.0, "CPU");
  EXPECT_NE(line.find(", Mean TTFT: n/a, Mean ITL: 10.0 ms"), std::string::npos) << line;
}

TEST(StatsLogger, AppendsThePrefixCacheHitRateOfTheLookupsSinceTheLastLine) {
  EngineStats last, now;
  last.prefix_cache_queries_total = 1000;  // before the interval: excluded
  last.prefix_cache_hits_total = 0;
  now = last;
  now.prefix_cache_queries_total += 400;
  now.prefix_cache_hits_total += 300;
  std::string line = StatsLogger::format(now, last, 5.0, "GPU");
  EXPECT_NE(line.find("CPU KV cache usage: 0.0%, Prefix cache hit rate: 75.0%"), std::string::npos)
      << line;
  EXPECT_EQ(StatsLogger::format(now, now, 5.0, "GPU").find("Prefix cache"),
            std::string::npos);  // no lookups
}

TEST(LatencyHistogram, BucketsAreUpperInclusive) {
  LatencyHistogram h({0.1, 1.0});
  h.observe(0.1);   // le="0.1"
  h.observe(0.5);   // le="1"
  h.observe(2.0);   // +Inf
  h.observe(0.05);  // le="0.1"
  EXPECT_EQ(h.counts, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(h.count, 4);
  EXPECT_DOUBLE_EQ(h.sum, 2.65);
}

}  // namespace
}  // namespace pagoda
