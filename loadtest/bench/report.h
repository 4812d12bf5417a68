// The benchmark's printed summary and its JSON result file.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadtest/bench/metrics.h"

namespace pagoda::bench {

struct ReportOptions {
  std::vector<std::string> percentile_metrics;  // of ttft, tpot, itl, e2el, in print order
  bool goodput = false;                         // --goodput was given
  double request_rate = 0;                      // req/s (infinity: "inf")
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: none
};

// vLLM's "============ Serving Benchmark Result ============" table
// (successful and failed requests, with "  of which client-side:" when
// some failed on the client's machine (EMFILE...), duration, tokens, throughputs, then a
// section per selected metric: mean, median, each percentile, in ms),
// followed by the seed's table (vLLM's first benchmark_serving.py: Total
// time, Throughput, Average latency, per token, per output token).
std::string format_summary(const BenchmarkMetrics& m, double duration_s, const ReportOptions& opt);

// The result file: vLLM's keys (duration, completed, total_input_tokens,
// ..., mean_/median_/std_/pNN_<metric>_ms for every metric) plus `failed`,
// `failed_client_side`, the seed's three averages, and `requests`: every
// request's request_id, success, start, prompt_len (the server's
// usage.prompt_tokens when it sent one, else the dataset's),
// dataset_prompt_len, output_len, ttft, itl, latency (seconds) and error. detailed: also vLLM's
// per-request lists (input_lens, output_lens, ttfts, itls, generated_texts, errors).
nlohmann::json result_json(const BenchmarkMetrics& m, const std::vector<RequestResult>& results,
                           double duration_s, const ReportOptions& opt, bool detailed);

// The failed requests' errors, most common first, one line each
// ("  780 × HTTP 503: ..."; each text cut to 200 bytes), at most `limit`
// distinct texts and a last line counting the others; "" when none failed.
// Printed after the summary so a run with failures says why (vLLM keeps
// them only in the result file).
std::string format_errors(const std::vector<RequestResult>& results, size_t limit = 3);

// The result file's text: j indented by 2, a newline at the end; bytes
// that are not UTF-8 (a server's error body) become U+FFFD instead of
// throwing.
std::string dump_result(const nlohmann::json& j);

}  // namespace pagoda::bench
