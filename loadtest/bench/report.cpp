#include "loadtest/bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace pagoda::bench {

namespace {

const Distribution& metric(const BenchmarkMetrics& m, const std::string& name) {
  if (name == "ttft") return m.ttft;
  if (name == "tpot") return m.tpot;
  if (name == "itl") return m.itl;
  return m.e2el;
}

struct MetricNames {
  const char* label;
  const char* header;
};

MetricNames names(const std::string& name) {
  if (name == "ttft") return {"TTFT", "Time to First Token"};
  if (name == "tpot") return {"TPOT", "Time per Output Token (excl. 1st token)"};
  if (name == "itl") return {"ITL", "Inter-token Latency"};
  return {"E2EL", "End-to-end Latency"};
}

// "99" for 99.0, "99.9" for 99.9 (vLLM's p_word).
std::string percentile_word(double p) {
  return p == std::floor(p) ? fmt::format("{}", static_cast<int64_t>(p)) : fmt::format("{}", p);
}

std::string row(const std::string& label, const std::string& value) {
  return fmt::format("{:<40} {:<10}\n", label, value);
}

}  // namespace

std::string format_summary(const BenchmarkMetrics& m, double duration_s, const ReportOptions& opt) {
  std::string s = fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  s += row("Successful requests:", fmt::format("{}", m.completed));
  s += row("Failed requests:", fmt::format("{}", m.failed));
  if (m.failed_client_side > 0)
    s += row("  of which client-side:", fmt::format("{}", m.failed_client_side));
  if (opt.max_concurrency > 0)
    s += row("Maximum request concurrency:", fmt::format("{}", opt.max_concurrency));
  s += row("Benchmark duration (s):", fmt::format("{:.2f}", duration_s));
  s += row("Total input tokens:", fmt::format("{}", m.total_input));
  s += row("Total generated tokens:", fmt::format("{}", m.total_output));
  s += row("Request throughput (req/s):", fmt::format("{:.2f}", m.request_throughput));
  if (opt.goodput) s += row("Request goodput (req/s):", fmt::format("{:.2f}", m.request_goodput));
  s += row("Output token throughput (tok/s):", fmt::format("{:.2f}", m.output_throughput));
  s += row("Total Token throughput (tok/s):", fmt::format("{:.2f}", m.total_token_throughput));
  for (const std::string& name : opt.percentile_metrics) {
    const MetricNames n = names(name);
    const Distribution& d = metric(m, name);
    s += fmt::format("{:-^50}\n", n.header);
    s += row(fmt::format("Mean {} (ms):", n.label), fmt::format("{:.2f}", d.mean_ms));
    s += row(fmt::format("Median {} (ms):", n.label), fmt::format("{:.2f}", d.median_ms));
    for (const auto& [p, v] : d.percentiles_ms)
      s += row(fmt::format("P{} {} (ms):", percentile_word(p), n.label), fmt::format("{:.2f}", v));
  }
  s += std::string(50, '=') + "\n";
  s += fmt::format("Total time: {:.2f} s\n", duration_s);
  s += fmt::format("Throughput: {:.2f} requests/s\n", m.request_throughput);
  s += fmt::format("Average latency: {:.2f} s\n", m.avg_latency_s);
  s += fmt::format("Average latency per token: {:.4f} s\n", m.avg_latency_per_token_s);
  s +=
      fmt::format("Average latency per output token: {:.4f} s\n", m.avg_latency_per_output_token_s);
  return s;
}

nlohmann::json result_json(const BenchmarkMetrics& m, const std::vector<RequestResult>& results,
                           double duration_s, const ReportOptions& opt, bool detailed) {
  using nlohmann::json;
  json j;
  if (std::isinf(opt.request_rate))
    j["request_rate"] = "inf";
  else
    j["request_rate"] = opt.request_rate;
  j["burstiness"] = opt.burstiness;
  j["max_concurrency"] = opt.max_concurrency > 0 ? json(opt.max_concurrency) : json();
  j["duration"] = duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["failed_client_side"] = m.failed_client_side;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = opt.goodput ? json(m.request_goodput) : json();
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  for (const char* name : {"ttft", "tpot", "itl", "e2el"}) {
    const Distribution d = metric(m, name);  // a copy (GCC 13's -Wdangling-reference)
    j[fmt::format("mean_{}_ms", name)] = d.mean_ms;
    j[fmt::format("median_{}_ms", name)] = d.median_ms;
    j[fmt::format("std_{}_ms", name)] = d.std_ms;
    for (const auto& [p, v] : d.percentiles_ms)
      j[fmt::format("p{}_{}_ms", percentile_word(p), name)] = v;
  }
  j["avg_latency_s"] = m.avg_latency_s;
  j["avg_latency_per_token_s"] = m.avg_latency_per_token_s;
  j["avg_latency_per_output_token_s"] = m.avg_latency_per_output_token_s;
  json reqs = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const RequestResult& r = results[i];
    reqs.push_back({{"request_id", r.request_id},
                    {"success", r.success},
                    {"start", r.start},
                    {"prompt_len", i < m.input_lens.size() ? m.input_lens[i] : r.prompt_len},
                    {"dataset_prompt_len", r.prompt_len},
                    {"output_len", i < m.output_lens.size() ? m.output_lens[i] : 0},
                    {"ttft", r.ttft},
                    {"itl", r.itl},
                    {"latency", r.latency},
                    {"error", r.error}});
  }
  j["requests"] = std::move(reqs);
  if (detailed) {
    json input_lens = json::array(), ttfts = json::array(), itls = json::array(),
         texts = json::array(), errors = json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const RequestResult& r = results[i];
      input_lens.push_back(i < m.input_lens.size() ? m.input_lens[i] : r.prompt_len);
      ttfts.push_back(r.ttft);
      itls.push_back(r.itl);
      texts.push_back(r.generated_text);
      errors.push_back(r.error);
    }
    j["input_lens"] = std::move(input_lens);
    j["output_lens"] = m.output_lens;
    j["ttfts"] = std::move(ttfts);
    j["itls"] = std::move(itls);
    j["generated_texts"] = std::move(texts);
    j["errors"] = std::move(errors);
  }
  return j;
}

std::string format_errors(const std::vector<RequestResult>& results, size_t limit) {
  std::map<std::string, int64_t> counts;
  for (const RequestResult& r : results)
    if (!r.success) ++counts[r.error.substr(0, 200)];
  if (counts.empty()) return "";
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = "Errors of the failed requests (most common first):\n";
  for (size_t i = 0; i < sorted.size() && i < limit; ++i)
    s += fmt::format("  {} x {}\n", sorted[i].second, sorted[i].first);
  if (sorted.size() > limit) s += fmt::format("  ... and {} other texts\n", sorted.size() - limit);
  return s;
}

std::string dump_result(const nlohmann::json& j) {
  // Servers' error texts may not be UTF-8: replace what is not (U+FFFD)
  // rather than throw after the whole run.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace pagoda::bench
