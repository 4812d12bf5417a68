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

// prometheus_client's floatToGoString: "0.25", "1.0", "+Inf".
std::string le_value(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void histogram(std::string& out, const char* name, const char* help, const LatencyHistogram& h,
               const std::string& labels) {
  family(out, name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    std::string le = i < h.bounds.size() ? le_value(h.bounds[i]) : "+Inf";
    out += fmt::format("pagoda:{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out += fmt::format("pagoda:{}_sum{{{}}} {}\n", name, labels, h.sum);
  out += fmt::format("pagoda:{}_count{{{}}} {}\n", name, labels, h.count);
}

}  // namespace

std::string format_prometheus_metrics(const EngineStats& s, const std::string& model_name) {
  std::string out;
  std::string labels = fmt::format("model_name=\"{}\"", escape_label(model_name));
  family(out, "num_requests_running", "gauge", "Number of requests in model execution batches.");
  out += fmt::format("pagoda:num_requests_running{{{}}} {}\n", labels, s.num_running);
  family(out, "num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  out += fmt::format("pagoda:num_requests_waiting{{{}}} {}\n", labels, s.num_waiting);
  family(out, "num_requests_swapped", "gauge", "Number of requests swapped to CPU.");
  out += fmt::format("pagoda:num_requests_swapped{{{}}} {}\n", labels, s.num_swapped);
  family(out, "kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  out += fmt::format("pagoda:kv_cache_usage_perc{{{}}} {}\n", labels, s.kv_cache_usage());
  family(out, "cpu_cache_usage_perc", "gauge", "CPU KV-cache usage. 1 means 100 percent usage.");
  out += fmt::format("pagoda:cpu_cache_usage_perc{{{}}} {}\n", labels, s.cpu_cache_usage());
  family(out, "kv_cache_blocks_total", "gauge", "Number of KV-cache blocks.");
  out += fmt::format("pagoda:kv_cache_blocks_total{{{}}} {}\n", labels, s.kv_blocks_total);
  family(out, "kv_cache_used_blocks", "gauge", "Number of KV-cache blocks in use.");
  out += fmt::format("pagoda:kv_cache_used_blocks{{{}}} {}\n", labels, s.kv_blocks_used);
  // Counters: in the 0.0.4 text format the TYPE line names the sample itself,
  // _total included (what prometheus_client's generate_latest, and so vLLM,
  // writes; a strict parser such as Go's expfmt otherwise sees an untyped
  // family).
  family(out, "prompt_tokens_total", "counter", "Number of prompt tokens (each request's prompt once, at its first token).");
  out += fmt::format("pagoda:prompt_tokens_total{{{}}} {}\n", labels, s.prompt_tokens_total);
  family(out, "generation_tokens_total", "counter", "Number of generation tokens processed.");
  out += fmt::format("pagoda:generation_tokens_total{{{}}} {}\n", labels, s.generation_tokens_total);
  family(out, "prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  out += fmt::format("pagoda:prefix_cache_queries_total{{{}}} {}\n", labels,
                     s.prefix_cache_queries_total);
  family(out, "prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of number of cached tokens.");
  out +=
      fmt::format("pagoda:prefix_cache_hits_total{{{}}} {}\n", labels, s.prefix_cache_hits_total);
  family(out, "num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.");
  out += fmt::format("pagoda:num_preemptions_total{{{}}} {}\n", labels, s.num_preemptions_total);
  family(out, "request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = s.requests_finished_total.find(reason);
    out += fmt::format("pagoda:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels, reason,
                       it == s.requests_finished_total.end() ? 0 : it->second);
  }
  family(out, "engine_steps_total", "counter", "Number of engine steps that ran a batch.");
  out += fmt::format("pagoda:engine_steps_total{{{}}} {}\n", labels, s.steps_total);
  histogram(out, "time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            s.time_to_first_token, labels);
  histogram(out, "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            s.inter_token_latency, labels);
  histogram(out, "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            s.e2e_request_latency, labels);
  return out;
}

std::string format_stream_metrics(size_t streams, size_t detached, const std::string& model_name) {
  std::string out;
  std::string labels = fmt::format("model_name=\"{}\"", escape_label(model_name));
  family(out, "ws_streams", "gauge", "WebSocket requests running or not yet delivered.");
  out += fmt::format("pagoda:ws_streams{{{}}} {}\n", labels, streams);
  family(out, "ws_streams_detached", "gauge", "WebSocket streams kept for a resume after their connection dropped.");
  out += fmt::format("pagoda:ws_streams_detached{{{}}} {}\n", labels, detached);
  return out;
}

}  // namespace pagoda
