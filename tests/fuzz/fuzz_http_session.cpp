// libFuzzer target: the HTTP session path on raw bytes, as HttpSession runs
// it minus the socket: Beast's request_parser (the server's body limit,
// scaled down to keep inputs fast) over the bytes as one keep-alive stream
// of requests, then check_access (an API key and allowed origins set) and
// Router::route, and for a valid generation a GenerationGroup submitted to
// a null engine and aborted (as a client that leaves). Invariants: no crash
// or sanitizer report; every answer is a valid status and a JSON error body
// for 4xx/5xx; never a 500 (the router's answer to an exception escaping
// a parser).
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "server/access_control.h"
#include "server/generation_group.h"
#include "server/router.h"
#include "tests/fuzz/fuzz_model.h"

namespace http = boost::beast::http;

namespace {

const pagoda::ServerContext& context() {
  static pagoda::fuzz::NullEngine engine;
  static const pagoda::ServerContext ctx = [] {
    pagoda::ServerContext c;
    c.model = pagoda::fuzz::stories_model();
    c.engine = &engine;
    c.access.api_key = "k";
    c.access.allowed_origins = {"http://a.example"};
    return c;
  }();
  return ctx;
}

void check(const pagoda::RouteResult& r) {
  if (r.status < 100 || r.status > 599) std::abort();
  // 500 is the router's answer to an unexpected exception: a bug.
  if (r.status == 500) std::abort();
  if (r.status >= 400 && r.content_type == "application/json" && !nlohmann::json::accept(r.body))
    std::abort();
}

}  // namespace

// The model (tokenizer, template) is loaded before fuzzing starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pagoda::fuzz::stories_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const pagoda::ServerContext& ctx = context();
  pagoda::Router router(ctx);
  const char* p = reinterpret_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 << 10);
    parser.eager(true);
    boost::beast::error_code ec;
    size_t used = 0;
    while (!ec && !parser.is_done() && used < left) {
      size_t n = parser.put(boost::asio::buffer(p + used, left - used), ec);
      if (ec == http::error::need_more) {
        ec = {};
        if (n == 0) break;
      }
      used += n;
    }
    if (!parser.is_done()) {
      if (!ec) parser.put_eof(ec);
      if (!parser.is_done()) return 0;  // the session answers 400/413/431 and closes
    }
    auto req = parser.release();
    (void)pagoda::cors_headers(ctx.access, req[http::field::origin]);
    (void)pagoda::websocket_access_ok(ctx.access, req.target(), req[http::field::authorization]);
    auto denied = pagoda::check_access(ctx.access, req.method(), req.target(),
                                       req[http::field::authorization], req[http::field::origin],
                                       req[http::field::access_control_request_headers]);
    pagoda::RouteResult r = denied ? std::move(*denied)
                                   : router.route(req.method(), req.target(), req.body(),
                                                  req[http::field::content_type]);
    check(r);
    if (r.generate) {
      pagoda::GenerationGroup group(std::move(*r.generate), *ctx.engine, [] {});
      group.submit();
      group.abort();
    }
    if (!req.keep_alive() || used == 0) break;
    p += used;
    left -= used;
  }
  return 0;
}
