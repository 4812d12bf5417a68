#include "loadtest/bench/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace pagoda::bench {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution summarize(std::vector<double> v, const std::vector<double>& percentiles) {
  Distribution d;
  if (!v.empty()) {
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double sq = 0.0;
    for (double x : v) sq += (x - mean) * (x - mean);
    d.mean_ms = mean * 1e3;
    d.std_ms = std::sqrt(sq / n) * 1e3;
    d.median_ms = percentile(v, 50.0) * 1e3;
  }
  for (double p : percentiles) d.percentiles_ms.emplace_back(p, percentile(v, p) * 1e3);
  return d;
}

GoodputSlo parse_goodput(const std::vector<std::string>& pairs) {
  GoodputSlo g;
  for (const std::string& pair : pairs) {
    const size_t colon = pair.find(':');
    double value = -1.0;
    try {
      if (colon != std::string::npos) {
        size_t used = 0;
        value = std::stod(pair.substr(colon + 1), &used);
        if (used != pair.size() - colon - 1) value = -1.0;
      }
    } catch (const std::exception&) {
      value = -1.0;
    }
    if (!(value >= 0.0))
      throw std::invalid_argument(
          fmt::format("--goodput: '{}' is not KEY:VALUE with a number of milliseconds >= 0", pair));
    const std::string key = pair.substr(0, colon);
    if (key == "ttft")
      g.ttft_ms = value;
    else if (key == "tpot")
      g.tpot_ms = value;
    else if (key == "e2el")
      g.e2el_ms = value;
    else
      throw std::invalid_argument(
          fmt::format("--goodput: unknown metric '{}' (valid: ttft, tpot, e2el)", key));
  }
  return g;
}

BenchmarkMetrics calculate_metrics(const std::vector<RequestResult>& results, double duration_s,
                                   const std::function<int64_t(const std::string&)>& count_tokens,
                                   const std::vector<double>& percentiles,
                                   const GoodputSlo& goodput) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, itls, e2els;
  int64_t good = 0;
  double sum_latency = 0.0, sum_per_token = 0.0, sum_per_output = 0.0;
  int64_t with_output = 0;
  for (const RequestResult& r : results) {
    const int64_t in = r.prompt_tokens.value_or(r.prompt_len);
    m.input_lens.push_back(in);
    if (!r.success) {
      m.output_lens.push_back(0);
      ++m.failed;
      if (r.client_side) ++m.failed_client_side;
      continue;
    }
    const int64_t out = r.output_tokens ? *r.output_tokens : count_tokens(r.generated_text);
    m.output_lens.push_back(out);
    m.total_input += in;
    m.total_output += out;
    double tpot = 0.0;  // ≤ 1 output token: 0 for goodput, not in the TPOT figures
    if (out > 1) {
      tpot = (r.latency - r.ttft) / static_cast<double>(out - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    ++m.completed;
    if (!goodput.empty()) {
      const bool ok = (!goodput.ttft_ms || r.ttft <= *goodput.ttft_ms / 1e3) &&
                      (!goodput.tpot_ms || tpot <= *goodput.tpot_ms / 1e3) &&
                      (!goodput.e2el_ms || r.latency <= *goodput.e2el_ms / 1e3);
      if (ok) ++good;
    }
    sum_latency += r.latency;
    if (in + out > 0) sum_per_token += r.latency / static_cast<double>(in + out);
    if (out > 0) {
      sum_per_output += r.latency / static_cast<double>(out);
      ++with_output;
    }
  }
  const double d = duration_s;
  m.request_throughput = static_cast<double>(m.completed) / d;
  m.request_goodput = static_cast<double>(good) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / d;
  m.ttft = summarize(std::move(ttfts), percentiles);
  m.tpot = summarize(std::move(tpots), percentiles);
  m.itl = summarize(std::move(itls), percentiles);
  m.e2el = summarize(std::move(e2els), percentiles);
  if (m.completed > 0) {
    m.avg_latency_s = sum_latency / static_cast<double>(m.completed);
    m.avg_latency_per_token_s = sum_per_token / static_cast<double>(m.completed);
  }
  if (with_output > 0)
    m.avg_latency_per_output_token_s = sum_per_output / static_cast<double>(with_output);
  return m;
}

}  // namespace pagoda::bench
