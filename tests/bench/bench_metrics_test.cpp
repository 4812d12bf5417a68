// pagoda-bench's metric math (loadtest/bench/metrics.h) against values
// computed by hand from vLLM's definitions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "loadtest/bench/metrics.h"
#include "loadtest/bench/progress.h"
#include "loadtest/bench/report.h"

namespace pagoda::bench {
namespace {

TEST(BenchMetrics, PercentileInterpolatesLinearlyAsNumpy) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);  // position 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);  // position 2.7
  EXPECT_NEAR(percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0);
}

TEST(BenchMetrics, SummarizeInMillisecondsWithPopulationStd) {
  Distribution d = summarize({0.4, 0.1, 0.3, 0.2}, {90});
  EXPECT_NEAR(d.mean_ms, 250, 1e-9);
  EXPECT_NEAR(d.median_ms, 250, 1e-9);
  EXPECT_NEAR(d.std_ms, 111.80339887, 1e-6);  // sqrt((150² + 50² + 50² + 150²) / 4)
  ASSERT_EQ(d.percentiles_ms.size(), 1u);
  EXPECT_NEAR(d.percentiles_ms[0].second, 370, 1e-9);
  Distribution empty = summarize({}, {99});  // np.mean(ttfts or 0): zeros
  EXPECT_EQ(empty.mean_ms, 0);
  EXPECT_EQ(empty.percentiles_ms[0].second, 0);
}

// Four requests over 2 s:
//   A: 10-token prompt, TTFT 0.1 s, latency 1.1 s, 11 output tokens (usage), ITL 0.2 0.3 0.5
//   B: 5-token prompt, TTFT 0.3 s, latency 0.3 s, 1 output token (no TPOT)
//   C: failed
//   D: 20-token prompt, TTFT 0.2 s, latency 0.8 s, no usage: the tokenizer counts 4, ITL 0.6
std::vector<RequestResult> four_requests() {
  RequestResult a, b, c, d;
  a.success = true, a.prompt_len = 10, a.ttft = 0.1, a.latency = 1.1, a.output_tokens = 11,
  a.itl = {0.2, 0.3, 0.5};
  b.success = true, b.prompt_len = 5, b.ttft = 0.3, b.latency = 0.3, b.output_tokens = 1;
  c.success = false, c.prompt_len = 7, c.error = "HTTP 400: too long";
  d.success = true, d.prompt_len = 20, d.ttft = 0.2, d.latency = 0.8,
  d.generated_text = "four tokens here", d.itl = {0.6};
  return {a, b, c, d};
}

int64_t four_tokens(const std::string& text) { return text == "four tokens here" ? 4 : -1000; }

TEST(BenchMetrics, CalculateMetricsMatchesHandComputedValues) {
  BenchmarkMetrics m = calculate_metrics(four_requests(), 2.0, four_tokens, {90, 99}, {});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 35);   // the failed request's prompt does not count
  EXPECT_EQ(m.total_output, 16);  // 11 + 1 + 4
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{11, 1, 0, 4}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 8.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 25.5);
  // TTFT {0.1, 0.3, 0.2}
  EXPECT_NEAR(m.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 81.64965809, 1e-6);
  // TPOT: A (1.1 - 0.1) / 10 = 0.1, D (0.8 - 0.2) / 3 = 0.2; B has one token
  EXPECT_NEAR(m.tpot.mean_ms, 150, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[1].second, 199, 1e-9);  // p99: 0.1 + 0.1 * 0.99
  // ITL pooled {0.2, 0.3, 0.5, 0.6}
  EXPECT_NEAR(m.itl.mean_ms, 400, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 400, 1e-9);
  EXPECT_NEAR(m.itl.percentiles_ms[0].second, 570, 1e-9);  // p90: 0.5 + 0.1 * 0.7
  // E2EL {1.1, 0.3, 0.8}
  EXPECT_NEAR(m.e2el.mean_ms, 733.3333333, 1e-6);
  EXPECT_NEAR(m.e2el.median_ms, 800, 1e-9);
  // The seed's table: latency, latency / (prompt + output), latency / output
  EXPECT_NEAR(m.avg_latency_s, 2.2 / 3, 1e-12);
  EXPECT_NEAR(m.avg_latency_per_token_s, (1.1 / 21 + 0.3 / 6 + 0.8 / 24) / 3, 1e-12);
  EXPECT_NEAR(m.avg_latency_per_output_token_s, (0.1 + 0.3 + 0.2) / 3, 1e-12);
}

TEST(BenchMetrics, GoodputCountsRequestsMeetingEverySlo) {
  // ttft ≤ 250 ms and tpot ≤ 150 ms: A (100, 100) yes; B (300, -) no; D (200, 200) no.
  BenchmarkMetrics m = calculate_metrics(four_requests(), 2.0, four_tokens, {99},
                                         parse_goodput({"ttft:250", "tpot:150"}));
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);
  // A one-token request's TPOT is 0 for goodput: B meets tpot alone.
  m = calculate_metrics(four_requests(), 2.0, four_tokens, {99}, parse_goodput({"tpot:150"}));
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.0);
  // e2el ≤ 1000 ms: B and D.
  m = calculate_metrics(four_requests(), 2.0, four_tokens, {99}, parse_goodput({"e2el:1000"}));
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.0);
  m = calculate_metrics(four_requests(), 2.0, four_tokens, {99},
                        parse_goodput({"e2el:1000", "ttft:150"}));
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.0);
}

TEST(BenchMetrics, ParseGoodputRejectsBadPairs) {
  GoodputSlo g = parse_goodput({"ttft:12.5", "e2el:0"});
  EXPECT_EQ(g.ttft_ms, 12.5);
  EXPECT_EQ(g.e2el_ms, 0.0);
  EXPECT_FALSE(g.tpot_ms);
  for (const char* bad : {"ttft", "ttft:", "ttft:-1", "ttft:1x", "latency:5", ":5"})
    EXPECT_THROW(parse_goodput({bad}), std::invalid_argument) << bad;
}

TEST(BenchMetrics, AllFailedGivesZerosNotNaN) {
  RequestResult f;
  f.error = "refused";
  BenchmarkMetrics m = calculate_metrics({f, f}, 1.0, four_tokens, {99}, {});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.avg_latency_s, 0);
  EXPECT_EQ(m.request_throughput, 0);
}

TEST(BenchMetrics, ServerPromptTokensPreferredAndClientSideFailuresCounted) {
  RequestResult a;
  a.success = true;
  a.prompt_len = 10;
  a.prompt_tokens = 13;  // the server's usage
  a.output_tokens = 2;
  a.latency = 1.0;
  RequestResult b = a;
  b.prompt_tokens.reset();  // no usage: the dataset's count
  RequestResult c;
  c.error = "client-side: Too many open files";
  c.client_side = true;
  RequestResult d;
  d.error = "Connection refused";
  BenchmarkMetrics m = calculate_metrics({a, b, c, d}, 1.0, four_tokens, {99}, {});
  EXPECT_EQ(m.total_input, 23);
  EXPECT_EQ(m.input_lens, (std::vector<int64_t>{13, 10, 0, 0}));
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.failed_client_side, 1);
  ReportOptions o;
  o.percentile_metrics = {"ttft"};
  const std::string s = format_summary(m, 1.0, o);
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "  of which client-side:", "1")),
            std::string::npos)
      << s;
  nlohmann::json j = result_json(m, {a, b, c, d}, 1.0, o, false);
  EXPECT_EQ(j["failed_client_side"], 1);
  EXPECT_EQ(j["requests"][0]["prompt_len"], 13);
  EXPECT_EQ(j["requests"][0]["dataset_prompt_len"], 10);
  // No client-side failure: no such row.
  m = calculate_metrics({a, d}, 1.0, four_tokens, {99}, {});
  EXPECT_EQ(format_summary(m, 1.0, o).find("client-side"), std::string::npos);
}

TEST(BenchReport, ErrorsAreListedMostCommonFirst) {
  RequestResult ok;
  ok.success = true;
  RequestResult busy;
  busy.error = "HTTP 503: queue full";
  RequestResult refused;
  refused.error = "Connection refused";
  EXPECT_EQ(format_errors({ok, ok}), "");
  EXPECT_EQ(format_errors({refused, busy, ok, busy}),
            "Errors of the failed requests (most common first):\n  2 x HTTP 503: queue full\n"
            "  1 x Connection refused\n");
  RequestResult other;
  other.error = "HTTP 500: x";
  EXPECT_EQ(format_errors({refused, busy, other}, 2),
            "Errors of the failed requests (most common first):\n  1 x Connection refused\n"
            "  1 x HTTP 500: x\n  ... and 1 other texts\n");
}

TEST(BenchReport, ResultFileSurvivesTextThatIsNotUtf8) {
  RequestResult bad;
  bad.error = "HTTP 500: \xff\xfe oops";  // Latin-1 bytes from a server
  RequestResult split;
  split.error = "HTTP 500: x\xc3";  // a two-byte character cut after its first byte
  BenchmarkMetrics m = calculate_metrics({bad, split}, 1.0, four_tokens, {99}, {});
  ReportOptions o;
  nlohmann::json j = result_json(m, {bad, split}, 1.0, o, true);
  std::string text;
  ASSERT_NO_THROW(text = dump_result(j));
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["requests"][0]["error"], "HTTP 500: \xef\xbf\xbd\xef\xbf\xbd oops");
  EXPECT_EQ(back["requests"][1]["error"], "HTTP 500: x\xef\xbf\xbd");
  EXPECT_EQ(text.back(), '\n');
}

TEST(BenchReport, SummaryHasVllmsRowsAndTheSeedsTable) {
  BenchmarkMetrics m =
      calculate_metrics(four_requests(), 2.0, four_tokens, {99}, parse_goodput({"ttft:250"}));
  ReportOptions o;
  o.percentile_metrics = {"ttft", "e2el"};
  o.goodput = true;
  const std::string s = format_summary(m, 2.0, o);
  EXPECT_EQ(s.rfind("============ Serving Benchmark Result ============\n", 0), 0u) << s;
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "Successful requests:", "3")), std::string::npos)
      << s;
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "Failed requests:", "1")), std::string::npos)
      << s;
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "Request goodput (req/s):", "1.00")),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("---------------Time to First Token----------------\n"), std::string::npos) << s;
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "Mean TTFT (ms):", "200.00")), std::string::npos)
      << s;
  EXPECT_NE(s.find(fmt::format("{:<40} {:<10}\n", "Median E2EL (ms):", "800.00")),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("TPOT"), std::string::npos) << s;  // not selected
  EXPECT_NE(s.find("Total time: 2.00 s\nThroughput: 1.50 requests/s\nAverage latency: 0.73 s\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("Average latency per output token: 0.2000 s\n"), std::string::npos) << s;
}

TEST(BenchReport, ResultJsonKeepsEveryRequestsTimings) {
  const auto results = four_requests();
  BenchmarkMetrics m = calculate_metrics(results, 2.0, four_tokens, {99}, {});
  ReportOptions o;
  o.request_rate = std::numeric_limits<double>::infinity();
  nlohmann::json j = result_json(m, results, 2.0, o, true);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_NEAR(j["p99_tpot_ms"].get<double>(), 199, 1e-9);
  ASSERT_EQ(j["requests"].size(), 4u);
  EXPECT_EQ(j["requests"][0]["itl"], (std::vector<double>{0.2, 0.3, 0.5}));
  EXPECT_EQ(j["requests"][0]["output_len"], 11);
  EXPECT_EQ(j["requests"][2]["success"], false);
  EXPECT_EQ(j["requests"][2]["error"], "HTTP 400: too long");
  EXPECT_EQ(j["requests"][3]["output_len"], 4);
  EXPECT_EQ(j["output_lens"], (std::vector<int64_t>{11, 1, 0, 4}));
}

TEST(BenchProgress, FormatsLikeTqdm) {
  EXPECT_EQ(
      format_progress(45, 100, 3.0), " 45%|" + std::string() + [] {
        std::string s;
        for (int i = 0; i < 18; ++i) s += "█";
        return s;
      }() + std::string(22, ' ') + "| 45/100 [00:03<00:03, 15.00it/s]");
  EXPECT_EQ(format_progress(0, 10, 0.0),
            "  0%|" + std::string(40, ' ') + "| 0/10 [00:00<?, ?it/s]");
  // Half a cell: an eighth-block glyph; slow rates in s/it.
  EXPECT_EQ(format_progress(1, 80, 4.0, 10).substr(0, 8), "  1%|▏");
  EXPECT_NE(format_progress(1, 80, 4.0, 10).find("4.00s/it"), std::string::npos);
}

TEST(BenchProgress, FinalFrameDrawnOnce) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(3, true, f);  // draws the 0/3 frame
    bar.update();
    bar.update();
    bar.update();  // the last item: draws 3/3
    bar.close();   // already drawn: only the newline
    bar.close();
  }
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  size_t finals = 0;
  for (size_t at = out.find("3/3"); at != std::string::npos; at = out.find("3/3", at + 1)) ++finals;
  EXPECT_EQ(finals, 1u) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
}

}  // namespace
}  // namespace pagoda::bench
