// The chat UI's files (web/: plain HTML/CSS/JS, no build step) and the
// router's front-end block: GET / → index.html, GET /<name>.<ext> → that
// file of the web directory (ext: html, js, css, svg, png, ico, json;
// names of letters, digits, '-', '_' and '.', no subdirectories), and
// GET /v1/ws without a WebSocket upgrade → 426.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>

#include "server/router.h"
#include "server/server_context.h"

namespace pagoda {

// The web UI directory: `given` when non-empty (must hold index.html, else
// std::runtime_error); otherwise the first of <exe dir>/web,
// <exe dir>/../web, <exe dir>/../share/pagoda/web, PAGODA_SOURCE_DIR/web
// that holds index.html; "" when none does (the UI is then not served).
std::string resolve_web_dir(const std::string& given);

// nullopt: not a front-end path (the router goes on). Only GET matches.
std::optional<RouteResult> route_frontend(boost::beast::http::verb method, std::string_view path,
                                          const ServerContext& ctx);

}  // namespace pagoda
