// Asynchronous HTTP/1.1 client pieces for the load-test tools (Boost.Beast
// over Asio C++20 coroutines): connect, send a request, read a whole
// response, or read a Server-Sent-Events stream event by event. Every read
// and write has a deadline (beast::tcp_stream's expiry); a miss throws
// boost::system::system_error with beast::error::timeout. Socket errors throw
// boost::system::system_error.
#pragma once
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "loadtest/common/target.h"

namespace pagoda::loadtest {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct HttpResult {
  int status = 0;
  std::string body;
  bool keep_alive = false;
};

// Opens a TCP connection (TCP_NODELAY). rcvbuf > 0 sets SO_RCVBUF before
// connecting, so the advertised window stays small (a slow reader).
net::awaitable<void> connect(beast::tcp_stream& stream, const net::ip::tcp::endpoint& endpoint,
                             std::chrono::milliseconds timeout, int rcvbuf = 0);

// A request with Host, keep-alive and, for a body, Content-Type
// application/json and Content-Length set.
http::request<http::string_body> make_request(http::verb method, const std::string& path,
                                              std::string body);

net::awaitable<void> send(beast::tcp_stream& stream, http::request<http::string_body>& req,
                          std::chrono::milliseconds timeout);

// Reads one whole response (chunked bodies decoded; no body limit beyond 64 MiB).
net::awaitable<HttpResult> read_response(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                         std::chrono::milliseconds timeout);

// How strictly SseReader reads events. kStrict (pagoda_soak's check of
// Pagoda's own framing): every event is exactly "data: PAYLOAD\n\n".
// kLenient (any server, the benchmark client): the SSE grammar as browsers
// read it: LF or CRLF line ends, "data:" with or without the space, several
// data lines joined by "\n", comment lines (":") and other fields (event:,
// id:, retry:) skipped, events without data skipped, and a last event not
// closed by a blank line before the body ends still delivered.
enum class SseFraming { kStrict, kLenient };

// One response read as an SSE stream: read_header(), then next() per event.
// A non-200 answer's body is read whole by read_header (error_body()).
class SseReader {
 public:
  SseReader(beast::tcp_stream& stream, beast::flat_buffer& buffer,
            SseFraming framing = SseFraming::kStrict)
      : stream_(stream), buffer_(buffer), framing_(framing) {
    parser_.body_limit(boost::none);
  }
  // The status; for one other than 200 the whole body is read too.
  net::awaitable<int> read_header(std::chrono::milliseconds timeout);
  // The next event's `data:` payload, or nullopt once the body has ended.
  // kStrict: throws std::runtime_error on framing other than
  // "data: ...\n\n" or a body ending inside an event. A connection lost
  // mid-body throws boost::system::system_error (both framings).
  net::awaitable<std::optional<std::string>> next(std::chrono::milliseconds timeout);
  const std::string& error_body() const { return parser_.get().body(); }
  bool keep_alive() const { return parser_.get().keep_alive(); }

 private:
  // kLenient: the next event parsed from the body read so far, if complete
  // (at_end: the body has ended, so a last unterminated event counts too).
  std::optional<std::string> take_lenient_event(bool at_end);

  beast::tcp_stream& stream_;
  beast::flat_buffer& buffer_;
  SseFraming framing_;
  http::response_parser<http::string_body> parser_;
  std::string data_;       // kLenient: the current event's data lines so far
  bool has_data_ = false;  // kLenient: the current event has a data line
};

// One request on its own connection, in its own io_context (for set-up and
// final checks, not the load): GET when body is empty, else POST of JSON.
// Throws on any error.
HttpResult blocking_request(const Target& target, const std::string& path, const std::string& body,
                            std::chrono::milliseconds timeout);

}  // namespace pagoda::loadtest
