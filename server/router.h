// Router: maps (method, path, body) to a ready response or a generation to
// run. Endpoints: POST /v1/completions, POST /v1/chat/completions,
// GET /v1/models, GET /health, GET /version, GET /metrics, POST /tokenize,
// POST /detokenize, POST /generate (vLLM's api_server), GET /openapi.json,
// GET /docs. Unknown path →
// 404, known path with the wrong method → 405 (with Allow), a POST whose
// Content-Type is not application/json → 400, all as OpenAI error JSON. Runs on network threads;
// touches no socket and no engine state beyond EngineHandle::stats()/running().
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

#include "server/openai_error.h"
#include "server/openai_request.h"
#include "server/server_context.h"

namespace pagoda {

struct RouteResult {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra (e.g. Allow)
  // Set for /v1/completions and /v1/chat/completions when the request is
  // valid: the session submits it and answers from its output channel.
  std::optional<ParsedRequest> generate;

  static RouteResult json(int status, std::string body);
  static RouteResult error(const OpenAIError& e);
};

class Router {
 public:
  explicit Router(const ServerContext& ctx) : ctx_(ctx) {}
  // content_type: the request's Content-Type header ("" when absent). A
  // POST endpoint takes JSON only: another media type (text/plain, a form,
  // none) is a 400 "Unsupported Media Type: Only 'application/json' is
  // allowed", as vLLM's validate_json_request; parameters such as
  // "; charset=utf-8" are allowed. (Besides vLLM's behaviour, this keeps a
  // cross-site page from posting without a CORS preflight: browsers send
  // only text/plain, forms and multipart without one.)
  // x_request_id: the request's X-Request-Id header ("" when absent); it
  // names a completion or chat (cmpl-<id>, chatcmpl-<id>) before the body's
  // request_id, as vLLM's _base_request_id.
  RouteResult route(boost::beast::http::verb method, std::string_view target, std::string_view body,
                    std::string_view content_type, std::string_view x_request_id = {}) const;

 private:
  RouteResult models() const;
  RouteResult health() const;
  RouteResult metrics() const;
  const ServerContext& ctx_;
};

}  // namespace pagoda
