// Access control in front of the router: the API key (--api-key /
// PAGODA_API_KEY) and CORS (--allowed-origins), as vLLM's api_server does
// them (its AuthenticationMiddleware and Starlette's CORSMiddleware).
//
// API key: when set, a request whose raw path (the target up to '?', not
// normalized) starts with "/v1" or is /tokenize, /detokenize or /generate
// needs `Authorization: Bearer <key>`; the key is compared in constant time
// (every byte of the longer string is visited whatever the contents).
// Otherwise 401 with OpenAI's error JSON ({"error": {"type":
// "AuthenticationError", ...}}). /health, /metrics, /version, /openapi.json,
// /docs stay open. CORS preflights (OPTIONS) never need the key (browsers
// send none).
//
// CORS: with allowed origins configured, a request whose Origin is allowed
// ("*" allows any) gets Access-Control-Allow-Origin (the origin echoed, or
// "*" for the wildcard) and Vary: Origin; an OPTIONS preflight is answered
// 200 with the allowed methods and headers, or 400 "Disallowed CORS origin"
// for another origin. No origins configured (the default): no CORS headers
// and OPTIONS is an ordinary 405.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

namespace pagoda {

struct RouteResult;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct AccessPolicy {
  std::string api_key;                        // "" → no key required
  std::vector<std::string> allowed_origins;   // "" entries ignored; "*" any
};

// True when a equals b; the time taken depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether the raw target needs the API key (when one is set).
bool path_requires_key(std::string_view target);

// The ready answer when the request must not reach the router (401, a CORS
// preflight answer), else nullopt.
std::optional<RouteResult> check_access(const AccessPolicy& policy, boost::beast::http::verb method,
                                        std::string_view target, std::string_view authorization,
                                        std::string_view origin, std::string_view request_headers);

// A WebSocket upgrade to /v1/ws (browsers cannot set Authorization on a
// WebSocket): true when no key is set, or the Authorization header carries
// it, or the target's query has `api_key=<key>` (exact, not URL-decoded;
// constant-time compare). A query string can end up in proxy logs: prefer
// the header where the client can set it.
bool websocket_access_ok(const AccessPolicy& policy, std::string_view target, std::string_view authorization);

// Whether a WebSocket upgrade's Origin may open /v1/ws. Browsers send Origin
// on every WebSocket handshake and apply no CORS to it, so without this check
// any page a user visits could drive a local server and read its output.
// True when origin is empty (not a browser), allowed by --allowed-origins
// (the CORS rules: listed, or "*"), or the page's own server: the Origin's
// host and port equal the Host header's (ASCII case-insensitive; a missing
// port is the Origin scheme's default, 80 for http/ws, 443 for https/wss).
// "null" (sandboxed frames, file: pages) is same-origin with nothing.
bool websocket_origin_ok(const AccessPolicy& policy, std::string_view origin,
                         std::string_view host);

// The CORS headers for a request from origin (empty when not allowed).
HeaderList cors_headers(const AccessPolicy& policy, std::string_view origin);

// Parses --allowed-origins values: each a JSON list ('["*"]', vLLM's
// form), or comma-separated origins. Throws std::invalid_argument.
std::vector<std::string> parse_allowed_origins(const std::vector<std::string>& values);

}  // namespace pagoda
