// The benchmark's figures, as vLLM's benchmark_serving.py calculate_metrics
// defines them, from each request's client-side timings:
//   TTFT  send → first chunk carrying output;
//   ITL   every gap between consecutive output chunks (all requests pooled);
//   TPOT  per request, (latency − TTFT) / (output tokens − 1), requests with
//         more than one output token only;
//   E2EL  send → the last output chunk (the request's latency).
// Only successful requests count. Input tokens: the server's usage
// (prompt_tokens) when it sent one, else the dataset's prompt_len. Output tokens: the server's
// usage (completion_tokens) when it sent one, else the tokenizer's count of the generated text.
// Mean, median, standard deviation (population) and percentiles (linear interpolation, numpy's
// default) in milliseconds; an empty set gives 0 for each, as numpy's np.mean(ttfts or 0) does.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::bench {

// One request's outcome (seconds; client clock).
struct RequestResult {
  bool success = false;
  double start = 0.0;                    // send time, seconds from the benchmark's start
  double ttft = 0.0;                     // send → first output chunk
  std::vector<double> itl;               // gaps between consecutive output chunks
  double latency = 0.0;                  // send → last output chunk (E2EL)
  int64_t prompt_len = 0;                // the dataset's prompt length
  std::optional<int64_t> prompt_tokens;  // the server's usage.prompt_tokens
  std::optional<int64_t> output_tokens;  // the server's usage.completion_tokens
  std::string generated_text;
  std::string request_id;  // the response's id ("" when none was seen)
  std::string error;       // why it failed ("" on success)
  bool client_side = false;  // failed on the client's machine (is_client_side_error)
  bool timed_out = false;    // the request's deadline (--request-timeout) passed
};

// The p-th percentile (p in [0, 100]) of ascending `sorted` by linear
// interpolation between closest ranks (numpy.percentile's default):
// position p/100 · (n − 1). 0 for an empty vector.
double percentile(const std::vector<double>& sorted, double p);

// Mean, median, std and the requested percentiles of a set of durations.
struct Distribution {
  double mean_ms = 0.0;
  double median_ms = 0.0;
  double std_ms = 0.0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};
// values in seconds; result in milliseconds.
Distribution summarize(std::vector<double> values_s, const std::vector<double>& percentiles);

// --goodput ttft:MS tpot:MS e2el:MS: a request is good when every given SLO
// holds (value ≤ SLO; a request with ≤ 1 output token has TPOT 0 here).
struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
// Parses "KEY:VALUE" pairs (keys ttft, tpot, e2el; values ≥ 0 ms). Throws
// std::invalid_argument naming the bad pair.
GoodputSlo parse_goodput(const std::vector<std::string>& pairs);

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t failed_client_side = 0;       // of `failed`, those with client_side set
  int64_t total_input = 0;              // input tokens summed over completed requests
  int64_t total_output = 0;             // output tokens summed over completed requests
  double request_throughput = 0.0;      // completed / duration, req/s
  double request_goodput = 0.0;         // good / duration, req/s
  double output_throughput = 0.0;       // total_output / duration, tok/s
  double total_token_throughput = 0.0;  // (total_input + total_output) / duration, tok/s
  Distribution ttft, tpot, itl, e2el;
  std::vector<int64_t> input_lens;   // per request: usage.prompt_tokens, else prompt_len
  std::vector<int64_t> output_lens;  // per request (0 for a failed one)
  // The seed's table (vLLM's first benchmark_serving.py), completed
  // requests, seconds: mean latency, mean latency / (prompt + output
  // tokens), mean latency / output tokens (requests with output only).
  double avg_latency_s = 0.0;
  double avg_latency_per_token_s = 0.0;
  double avg_latency_per_output_token_s = 0.0;
};

// count_tokens(text): the tokenizer's token count of a generated text
// (without special tokens), used when a result has no output_tokens.
// duration_s > 0.
BenchmarkMetrics calculate_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const std::function<int64_t(const std::string&)>& count_tokens,
                                   const std::vector<double>& percentiles,
                                   const GoodputSlo& goodput);

}  // namespace pagoda::bench
