#include "loadtest/common/http_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>
#include <string_view>

namespace pagoda::loadtest {

using net::use_awaitable;

net::awaitable<void> connect(beast::tcp_stream& stream, const net::ip::tcp::endpoint& endpoint,
                             std::chrono::milliseconds timeout, int rcvbuf) {
  auto& sock = stream.socket();
  sock.open(endpoint.protocol());
  if (rcvbuf > 0) ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  stream.expires_after(timeout);
  co_await stream.async_connect(endpoint, use_awaitable);
  sock.set_option(net::ip::tcp::no_delay(true));
}

http::request<http::string_body> make_request(http::verb method, const std::string& path,
                                              std::string body) {
  http::request<http::string_body> req{method, path, 11};
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(true);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

net::awaitable<void> send(beast::tcp_stream& stream, http::request<http::string_body>& req,
                          std::chrono::milliseconds timeout) {
  stream.expires_after(timeout);
  co_await http::async_write(stream, req, use_awaitable);
}

net::awaitable<HttpResult> read_response(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                         std::chrono::milliseconds timeout) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  stream.expires_after(timeout);
  co_await http::async_read(stream, buffer, parser, use_awaitable);
  HttpResult out;
  out.status = parser.get().result_int();
  out.keep_alive = parser.get().keep_alive();
  out.body = std::move(parser.get().body());
  co_return out;
}

net::awaitable<int> SseReader::read_header(std::chrono::milliseconds timeout) {
  stream_.expires_after(timeout);
  co_await http::async_read_header(stream_, buffer_, parser_, use_awaitable);
  int status = parser_.get().result_int();
  if (status != 200) {
    stream_.expires_after(timeout);
    co_await http::async_read(stream_, buffer_, parser_, use_awaitable);
  }
  co_return status;
}

std::optional<std::string> SseReader::take_lenient_event(bool at_end) {
  std::string& body = parser_.get().body();
  size_t pos = 0;
  std::optional<std::string> event;
  for (;;) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) {
      if (!at_end || pos == body.size()) break;
      nl = body.size();  // the body ended inside a last line
    }
    std::string_view line(body.data() + pos, nl - pos);
    pos = std::min(nl + 1, body.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (has_data_) {
        event = std::move(data_);
        data_.clear();
        has_data_ = false;
        break;
      }
      continue;
    }
    if (line.front() == ':') continue;  // a comment
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value =
        colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field != "data") continue;  // event:, id:, retry: and unknown fields
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  body.erase(0, pos);
  if (!event && at_end && has_data_) {
    event = std::move(data_);
    data_.clear();
    has_data_ = false;
  }
  return event;
}

net::awaitable<std::optional<std::string>> SseReader::next(std::chrono::milliseconds timeout) {
  if (framing_ == SseFraming::kLenient) {
    for (;;) {
      if (auto event = take_lenient_event(parser_.is_done())) co_return event;
      if (parser_.is_done()) co_return std::nullopt;
      stream_.expires_after(timeout);
      co_await http::async_read_some(stream_, buffer_, parser_, use_awaitable);
    }
  }
  for (;;) {
    // string_body appends at the body's current size, so consumed events
    // can be erased between reads.
    std::string& body = parser_.get().body();
    size_t end = body.find("\n\n");
    if (end != std::string::npos) {
      if (body.compare(0, 6, "data: ") != 0)
        throw std::runtime_error("bad SSE framing: " + body.substr(0, 60));
      std::string payload = body.substr(6, end - 6);
      body.erase(0, end + 2);
      co_return payload;
    }
    if (parser_.is_done()) {
      if (!body.empty())
        throw std::runtime_error("SSE body ended inside an event: " + body.substr(0, 60));
      co_return std::nullopt;
    }
    stream_.expires_after(timeout);
    co_await http::async_read_some(stream_, buffer_, parser_, use_awaitable);
  }
}

HttpResult blocking_request(const Target& target, const std::string& path, const std::string& body,
                            std::chrono::milliseconds timeout) {
  net::io_context ioc;
  HttpResult result;
  std::exception_ptr error;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        beast::tcp_stream stream(ioc);
        beast::flat_buffer buffer;
        co_await connect(stream, {net::ip::make_address(target.host), target.port}, timeout);
        auto req = make_request(body.empty() ? http::verb::get : http::verb::post, path, body);
        req.keep_alive(false);
        co_await send(stream, req, timeout);
        result = co_await read_response(stream, buffer, timeout);
      },
      [&](std::exception_ptr e) { error = e; });
  ioc.run();
  if (error) std::rethrow_exception(error);
  return result;
}

}  // namespace pagoda::loadtest
