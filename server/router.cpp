#include "server/router.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/beast/core/string.hpp>
#include <chrono>
#include <exception>
#include <nlohmann/json.hpp>

#include "server/api_docs.h"
#include "server/metrics.h"
#include "server/preprocess_pool.h"
#include "server/tokenize_endpoints.h"
#include "server/version.h"
#include "server/web_assets.h"
#include "server/ws_stream.h"

namespace pagoda {

namespace http = boost::beast::http;
using nlohmann::json;

RouteResult RouteResult::json(int status, std::string body) {
  RouteResult r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

RouteResult RouteResult::error(const OpenAIError& e) { return json(e.status, e.body()); }

namespace {

RouteResult from_parse(ParseResult&& parsed) {
  if (auto* err = std::get_if<OpenAIError>(&parsed)) return RouteResult::error(*err);
  RouteResult r;
  r.generate = std::move(std::get<ParsedRequest>(parsed));
  return r;
}

RouteResult from_json_result(std::variant<json, OpenAIError>&& result) {
  if (auto* err = std::get_if<OpenAIError>(&result)) return RouteResult::error(*err);
  return RouteResult::json(200, std::get<json>(result).dump(-1, ' ', false, json::error_handler_t::replace));
}

// vLLM's validate_json_request: the media type (before any ';' parameters,
// case-insensitive) must be application/json.
bool is_json_media_type(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  return boost::beast::iequals(media, "application/json");
}

}  // namespace

RouteResult Router::route(http::verb method, std::string_view target, std::string_view body,
                          std::string_view content_type, std::string_view x_request_id) const {
  std::string_view path = target.substr(0, target.find('?'));
  // ---- streaming front end: the chat UI (web/) and /v1/ws without upgrade ----
  if (auto r = route_frontend(method, path, ctx_)) return std::move(*r);
  struct Route {
    std::string_view path;
    http::verb method;
  };
  static constexpr Route kRoutes[] = {
      {"/v1/completions", http::verb::post}, {"/v1/chat/completions", http::verb::post},
      {"/v1/models", http::verb::get},       {"/health", http::verb::get},
      {"/version", http::verb::get},         {"/metrics", http::verb::get},
      // vLLM's extra endpoints and the API description (issue 5).
      {"/tokenize", http::verb::post},       {"/detokenize", http::verb::post},
      {"/generate", http::verb::post},       {"/openapi.json", http::verb::get},
      {"/docs", http::verb::get},
  };
  const Route* found = nullptr;
  for (const Route& r : kRoutes)
    if (r.path == path) found = &r;
  if (!found) return RouteResult::error(not_found(fmt::format("Not Found: {}", path)));
  if (method != found->method) {
    RouteResult r = RouteResult::error(make_error(
        405, fmt::format("Method Not Allowed: {} {} (use {})", std::string(http::to_string(method)), path,
                         std::string(http::to_string(found->method)))));
    r.headers.emplace_back("Allow", std::string(http::to_string(found->method)));
    return r;
  }
  if (method == http::verb::post && !is_json_media_type(content_type))
    return RouteResult::error(
        bad_request("Unsupported Media Type: Only 'application/json' is allowed"));
  try {
    // vLLM's _base_request_id: the X-Request-Id header first.
    auto named = [&](ParseResult&& r, std::string_view prefix) {
      if (auto* req = std::get_if<ParsedRequest>(&r); req && !x_request_id.empty())
        req->request_id = std::string(prefix) + std::string(x_request_id);
      return from_parse(std::move(r));
    };
    if (path == "/v1/completions")
      return named(parse_completion_request(body, ctx_.model), "cmpl-");
    if (path == "/v1/chat/completions")
      return named(parse_chat_request(body, ctx_.model), "chatcmpl-");
    if (path == "/v1/models") return models();
    if (path == "/generate") return from_parse(parse_generate_request(body, ctx_.model));
    if (path == "/tokenize") return from_json_result(tokenize_request(body, ctx_.model));
    if (path == "/detokenize") return from_json_result(detokenize_request(body, ctx_.model));
    if (path == "/openapi.json") return RouteResult::json(200, std::string(openapi_json()));
    if (path == "/docs") {
      RouteResult r = RouteResult::json(200, docs_html());
      r.content_type = "text/html; charset=utf-8";
      return r;
    }
    if (path == "/health") return health();
    if (path == "/version") return RouteResult::json(200, json{{"version", pagoda_version()}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return metrics();
  } catch (const std::exception& e) {
    // A bug or resource failure (tokenizer, template internals): the
    // request fails alone; the server goes on.
    spdlog::error("{} {}: {}", std::string(http::to_string(method)), path, e.what());
    return RouteResult::error(make_error(500, fmt::format("Internal server error: {}", e.what())));
  }
}

RouteResult Router::models() const {
  static const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
  const ServingModel& m = ctx_.model;
  json card = {{"id", m.served_model_name}, {"object", "model"},    {"created", created},
               {"owned_by", "pagoda"},      {"root", m.model_dir},  {"parent", nullptr},
               {"max_model_len", m.max_model_len}};
  return RouteResult::json(200, json{{"object", "list"}, {"data", json::array({card})}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

RouteResult Router::health() const {
  // 503 while not running (starting, shutting down), hung or overloaded
  // (EngineAdapter::health).
  EngineHealth h =
      ctx_.engine ? ctx_.engine->health() : EngineHealth{false, "The engine is not running"};
  if (h.healthy && ctx_.preprocess && ctx_.limits.preprocess_hang_timeout.count() > 0) {
    const auto busy = ctx_.preprocess->longest_running();
    if (busy > ctx_.limits.preprocess_hang_timeout)
      h = EngineHealth{
          false, fmt::format("A preprocessing thread has spent {:.1f} s on one request (more than "
                             "--engine-hang-timeout)",
                             std::chrono::duration<double>(busy).count())};
  }
  if (h.healthy) {
    RouteResult r = RouteResult::json(200, "");
    r.content_type = "text/plain";
    return r;
  }
  return RouteResult::error(make_error(503, h.reason));
}

RouteResult Router::metrics() const {
  RouteResult r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = format_prometheus_metrics(ctx_.engine ? ctx_.engine->stats() : EngineStats{},
                                     ctx_.model.served_model_name);
  if (ctx_.preprocess) {
    const PreprocessPool& p = *ctx_.preprocess;
    std::string name;  // Prometheus label value escaping: \\ \" \n
    for (char c : ctx_.model.served_model_name)
      name += c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : std::string(1, c);
    const std::string label = fmt::format("{{model_name=\"{}\"}}", name);
    r.body += fmt::format(
        "# HELP pagoda:preprocess_running Requests being parsed, rendered and tokenized now.\n"
        "# TYPE pagoda:preprocess_running gauge\npagoda:preprocess_running{0} {1}\n"
        "# HELP pagoda:preprocess_queued Requests waiting for a preprocessing thread.\n"
        "# TYPE pagoda:preprocess_queued gauge\npagoda:preprocess_queued{0} {2}\n"
        "# HELP pagoda:preprocess_refused_total Requests answered 503 because the preprocessing "
        "queue was full.\n"
        "# TYPE pagoda:preprocess_refused_total counter\npagoda:preprocess_refused_total{0} {3}\n"
        "# HELP pagoda:preprocess_dropped_total Requests dropped because their client left during "
        "preprocessing.\n"
        "# TYPE pagoda:preprocess_dropped_total counter\npagoda:preprocess_dropped_total{0} {4}\n",
        label, p.running(), p.queued(), p.refused(), p.dropped());
  }
  if (ctx_.streams) r.body += format_stream_metrics(ctx_.streams->size(), ctx_.streams->num_detached(),
                                                    ctx_.model.served_model_name);
  return r;
}

}  // namespace pagoda
