// /metrics text: parsed by a strict Prometheus 0.0.4 parser
// (tests/support/prometheus_text.h), which is itself checked to reject what
// the format forbids.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/latency_tracker.h"
#include "server/metrics.h"
#include "tests/support/prometheus_text.h"

namespace pagoda {
namespace {

using testing_prom::parse_prometheus_text;

EngineStats busy_stats() {
  EngineStats s;
  s.num_running = 3;
  s.num_waiting = 1;
  s.num_swapped = 2;
  s.cpu_kv_blocks_total = 80;
  s.cpu_kv_blocks_used = 20;
  s.kv_blocks_total = 200;
  s.kv_blocks_used = 50;
  s.prompt_tokens_total = 120;
  s.generation_tokens_total = 345;
  s.steps_total = 99;
  s.prefix_cache_queries_total = 1000;
  s.prefix_cache_hits_total = 640;
  s.requests_finished_total = {{"stop", 4}, {"length", 2}};
  for (double v : {0.0005, 0.003, 0.2, 9000.0}) s.time_to_first_token.observe(v);
  for (double v : {0.004, 0.004, 0.03}) s.inter_token_latency.observe(v);
  s.e2e_request_latency.observe(1.2);
  return s;
}

TEST(Metrics, ParsesStrictlyWithVllmNamesAndConsistentHistograms) {
  std::string text = format_prometheus_metrics(busy_stats(), "stories \"260K\"");
  auto ex = parse_prometheus_text(text);  // throws on any violation
  std::map<std::string, std::string> m{{"model_name", "stories \"260K\""}};
  EXPECT_EQ(ex.value("pagoda:num_requests_running", m), 3);
  EXPECT_EQ(ex.value("pagoda:num_requests_waiting", m), 1);
  EXPECT_DOUBLE_EQ(ex.value("pagoda:kv_cache_usage_perc", m), 0.25);
  EXPECT_EQ(ex.value("pagoda:kv_cache_used_blocks", m), 50);
  // Preemption by swap: vLLM v0's swapped gauge and CPU (swap space) usage.
  EXPECT_EQ(ex.value("pagoda:num_requests_swapped", m), 2);
  EXPECT_EQ(ex.families.at("pagoda:num_requests_swapped").type, "gauge");
  EXPECT_DOUBLE_EQ(ex.value("pagoda:cpu_cache_usage_perc", m), 0.25);
  EXPECT_EQ(ex.families.at("pagoda:cpu_cache_usage_perc").type, "gauge");
  EXPECT_EQ(ex.value("pagoda:prompt_tokens_total", m), 120);
  EXPECT_EQ(ex.value("pagoda:generation_tokens_total", m), 345);
  EXPECT_EQ(ex.value("pagoda:engine_steps_total", m), 99);
  EXPECT_EQ(ex.value("pagoda:prefix_cache_queries_total", m), 1000);
  EXPECT_EQ(ex.value("pagoda:prefix_cache_hits_total", m), 640);
  EXPECT_EQ(ex.families.at("pagoda:prefix_cache_hits_total").type, "counter");
  EXPECT_EQ(ex.value("pagoda:request_success_total", {{"finished_reason", "stop"}}), 4);
  EXPECT_EQ(ex.value("pagoda:request_success_total", {{"finished_reason", "length"}}), 2);
  EXPECT_EQ(ex.value("pagoda:request_success_total", {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(ex.families.at("pagoda:prompt_tokens_total").type, "counter");
  EXPECT_EQ(ex.families.at("pagoda:time_to_first_token_seconds").type, "histogram");
  // TTFT: 0.0005 ≤ 0.001; 0.003 ≤ 0.005; 0.2 ≤ 0.25; 9000 only in +Inf.
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_bucket", {{"le", "0.001"}}), 1);
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_bucket", {{"le", "0.005"}}), 2);
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_bucket", {{"le", "0.25"}}), 3);
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_bucket", {{"le", "2560.0"}}), 3);
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(ex.value("pagoda:time_to_first_token_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(ex.value("pagoda:time_to_first_token_seconds_sum"), 0.0005 + 0.003 + 0.2 + 9000.0);
  EXPECT_EQ(ex.value("pagoda:inter_token_latency_seconds_bucket", {{"le", "0.01"}}), 2);
  EXPECT_EQ(ex.value("pagoda:inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(ex.value("pagoda:e2e_request_latency_seconds_bucket", {{"le", "1.0"}}), 0);
  EXPECT_EQ(ex.value("pagoda:e2e_request_latency_seconds_bucket", {{"le", "1.5"}}), 1);
}

TEST(Metrics, EmptyStatsParseToo) {
  auto ex = parse_prometheus_text(format_prometheus_metrics(EngineStats{}, "m"));
  EXPECT_EQ(ex.value("pagoda:e2e_request_latency_seconds_count"), 0);
  EXPECT_EQ(ex.value("pagoda:kv_cache_usage_perc"), 0);
  EXPECT_EQ(ex.value("pagoda:num_requests_swapped"), 0);
  EXPECT_EQ(ex.value("pagoda:cpu_cache_usage_perc"), 0);  // no swap space: 0, not NaN
}

TEST(PrometheusParser, RejectsWhatTheFormatForbids) {
  const char* bad[] = {
      "m 1",                                               // no final newline
      "1m 1\n",                                            // bad name
      "m{a=1} 1\n",                                        // unquoted label value
      "m{a=\"x\",a=\"y\"} 1\n",                            // duplicate label
      "m{a=\"\\t\"} 1\n",                                  // bad escape
      "m 1 2 3\n",                                         // trailing text
      "m one\n",                                           // bad value
      "m 1\nm 2\n",                                        // duplicate series
      "# TYPE m gauge\n# TYPE m gauge\nm 1\n",             // second TYPE
      "m 1\n# TYPE m gauge\n",                             // TYPE after samples
      "# TYPE m gauge\nm{a=\"1\"} 1\nn 1\nm{a=\"2\"} 1\n",  // not contiguous
      "# TYPE c_total counter\nc_total -1\n",               // negative counter
      "# TYPE c counter\nc_total 1\n",                      // counter name mismatch
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 1\n",  // decreasing
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 1\n",                          // no +Inf
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\nh_sum 1\n",                       // +Inf != count
      "# TYPE m gaug\nm 1\n",                                                                    // unknown type
  };
  for (const char* t : bad) EXPECT_THROW(parse_prometheus_text(t), std::runtime_error) << t;
  EXPECT_NO_THROW(parse_prometheus_text("# a comment\n# HELP m x\n# TYPE m gauge\nm{a=\"q\\\"\\n\"} NaN 123\n\n"));
}

TEST(LatencyTracker, ObservesTtftThenItlThenE2e) {
  using namespace std::chrono;
  EngineStats s;
  LatencyTracker t;
  auto t0 = LatencyTracker::Clock::time_point{} + seconds(100);
  t.on_token("a", 0, t0, t0 + milliseconds(50), s);  // TTFT 50 ms
  t.on_token("a", 0, t0, t0 + milliseconds(60), s);  // ITL 10 ms
  t.on_token("a", 0, t0, t0 + milliseconds(90), s);  // ITL 30 ms
  auto timings = t.finish("a", t0, t0 + milliseconds(90), s);  // e2e 90 ms
  ASSERT_TRUE(timings.has_value());
  EXPECT_NEAR(timings->ttft_s, 0.050, 1e-9);
  EXPECT_NEAR(timings->e2e_s, 0.090, 1e-9);
  EXPECT_EQ(s.time_to_first_token.count, 1);
  EXPECT_NEAR(s.time_to_first_token.sum, 0.050, 1e-9);
  EXPECT_EQ(s.inter_token_latency.count, 2);
  EXPECT_NEAR(s.inter_token_latency.sum, 0.040, 1e-9);
  EXPECT_EQ(s.e2e_request_latency.count, 1);
  EXPECT_NEAR(s.e2e_request_latency.sum, 0.090, 1e-9);
  EXPECT_EQ(t.size(), 0u);
  // One token that is also the last: TTFT and e2e, no ITL.
  t.on_token("b", 0, t0, t0 + milliseconds(5), s);
  t.finish("b", t0, t0 + milliseconds(5), s);
  EXPECT_FALSE(t.finish("b", t0, t0 + milliseconds(5), s));  // already finished: nothing
  EXPECT_EQ(s.time_to_first_token.count, 2);
  EXPECT_EQ(s.inter_token_latency.count, 2);
  EXPECT_EQ(s.e2e_request_latency.count, 2);
  // Three sequences of one request: one TTFT (the first token), each
  // sequence's gaps measured from its own previous token, one e2e.
  t.on_token("c", 0, t0, t0 + milliseconds(20), s);  // TTFT 20 ms
  t.on_token("c", 1, t0, t0 + milliseconds(20), s);
  t.on_token("c", 2, t0, t0 + milliseconds(20), s);
  t.on_token("c", 1, t0, t0 + milliseconds(27), s);  // ITL 7 ms
  t.on_token("c", 0, t0, t0 + milliseconds(30), s);  // ITL 10 ms
  t.on_token("c", 2, t0, t0 + milliseconds(33), s);  // ITL 13 ms
  t.finish("c", t0, t0 + milliseconds(33), s);
  EXPECT_EQ(s.time_to_first_token.count, 3);
  EXPECT_NEAR(s.time_to_first_token.sum, 0.050 + 0.005 + 0.020, 1e-9);
  EXPECT_EQ(s.inter_token_latency.count, 5);
  EXPECT_NEAR(s.inter_token_latency.sum, 0.040 + 0.030, 1e-9);
  EXPECT_EQ(s.e2e_request_latency.count, 3);
  // Pruning forgets requests that ended elsewhere.
  for (int i = 0; i < 100; ++i) t.on_token(fmt::format("r{}", i), 0, t0, t0 + milliseconds(1), s);
  t.prune(0, [](const std::string& id) { return id == "r7"; });
  EXPECT_EQ(t.size(), 1u);
}

}  // namespace
}  // namespace pagoda
