#include "server/metrics.h"

#include <fmt/format.h>

namespace pagoda {

namespace {

// Label values escape backslash, double quote and newline.
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP pagoda:{} {}\n# TYPE pagoda:{} {}\n", name, help, name, type);
}

}  // namespace

std::string format_prometheus_metrics(const EngineStats& s, const std::string& model_name) {
  std::string out;
  std::string labels = fmt::format("model_name=\"{}\"", escape_label(model_name));
  family(out, "num_requests_running", "gauge", "Number of requests in model execution batches.");
  out += fmt::format("pagoda:num_requests_running{{{}}} {}\n", labels, s.num_running);
  family(out, "num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  out += fmt::format("pagoda:num_requests_waiting{{{}}} {}\n", labels, s.num_waiting);
  family(out, "kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  out += fmt::format("pagoda:kv_cache_usage_perc{{{}}} {}\n", labels, s.kv_cache_usage());
  family(out, "kv_cache_blocks_total", "gauge", "Number of KV-cache blocks.");
  out += fmt::format("pagoda:kv_cache_blocks_total{{{}}} {}\n", labels, s.kv_blocks_total);
  // Counters: the TYPE line names the family without _total (Prometheus /
  // prometheus_client convention); samples carry the _total suffix.
  family(out, "prompt_tokens", "counter", "Number of prefill tokens processed.");
  out += fmt::format("pagoda:prompt_tokens_total{{{}}} {}\n", labels, s.prompt_tokens_total);
  family(out, "generation_tokens", "counter", "Number of generation tokens processed.");
  out += fmt::format("pagoda:generation_tokens_total{{{}}} {}\n", labels, s.generation_tokens_total);
  family(out, "num_preemptions", "counter", "Cumulative number of preemptions from the engine.");
  out += fmt::format("pagoda:num_preemptions_total{{{}}} {}\n", labels, s.num_preemptions_total);
  family(out, "request_success", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = s.requests_finished_total.find(reason);
    out += fmt::format("pagoda:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels, reason,
                       it == s.requests_finished_total.end() ? 0 : it->second);
  }
  return out;
}

}  // namespace pagoda
