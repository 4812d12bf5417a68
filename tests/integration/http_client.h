// A small synchronous HTTP/1.1 client for tests (Boost.Beast over a blocking
// loopback socket with a receive timeout, so a broken server fails a test
// instead of hanging it), plus an SSE body splitter.
#pragma once
#include <sys/socket.h>
#include <sys/time.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace pagoda::testing_http {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string allow;           // the Allow header (405)
  std::string transfer_encoding;
  std::string retry_after;  // the Retry-After header (503)
  std::string x_request_id;  // the X-Request-Id header
  bool keep_alive = false;
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port, int timeout_s = 120) : socket_(ioc_) {
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port);
    socket_.connect(ep);
    timeval tv{timeout_s, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }

  // Sends one request on this connection (kept alive) and reads the whole
  // response (chunked bodies decoded). Throws boost::system::system_error on
  // socket errors or a timeout.
  HttpResponse request(boost::beast::http::verb method, const std::string& target, const std::string& body = "") {
    send(method, target, body);
    return read_response();
  }
  HttpResponse post(const std::string& target, const std::string& body) {
    return request(boost::beast::http::verb::post, target, body);
  }
  HttpResponse get(const std::string& target) { return request(boost::beast::http::verb::get, target); }

  void send(boost::beast::http::verb method, const std::string& target, const std::string& body,
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (method == http::verb::post) req.set(http::field::content_type, "application/json");
    // headers replace those above; an empty value removes the header.
    for (const auto& [k, v] : headers) {
      if (v.empty())
        req.erase(k);
      else
        req.set(k, v);
    }
    req.body() = body;
    req.keep_alive(true);
    req.prepare_payload();
    http::write(socket_, req);
  }

  HttpResponse read_response() {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read(socket_, buffer_, parser);
    auto& res = parser.get();
    HttpResponse out;
    out.status = res.result_int();
    out.body = res.body();
    out.content_type = std::string(res[http::field::content_type]);
    out.allow = std::string(res[http::field::allow]);
    out.transfer_encoding = std::string(res[http::field::transfer_encoding]);
    out.retry_after = std::string(res[http::field::retry_after]);
    out.x_request_id = std::string(res["X-Request-Id"]);
    out.keep_alive = res.keep_alive();
    return out;
  }

  // Reads raw bytes until `needle` has been seen (or throws on EOF/timeout);
  // returns everything read. For reading part of a stream, then hanging up.
  std::string read_until(const std::string& needle) {
    std::string got;
    char buf[4096];
    while (got.find(needle) == std::string::npos) {
      size_t n = socket_.read_some(boost::asio::buffer(buf));
      got.append(buf, n);
    }
    return got;
  }

  void close() {
    boost::system::error_code ignored;
    socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  boost::asio::ip::tcp::socket& socket() { return socket_; }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// The `data:` payloads of an SSE body, in order ("[DONE]" included). Throws
// std::runtime_error when the framing is not `data: ...\n\n`.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    if (body.compare(pos, 6, "data: ") != 0) throw std::runtime_error("bad SSE framing at: " + body.substr(pos, 40));
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) throw std::runtime_error("unterminated SSE event: " + body.substr(pos, 40));
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

}  // namespace pagoda::testing_http
