// A synchronous WebSocket client for tests (Boost.Beast over loopback) on
// /v1/ws. Every read has a deadline (async read driven by run_for), so a
// broken server fails a test instead of hanging it.
#pragma once
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::testing_http {

using Headers = std::vector<std::pair<std::string, std::string>>;

class WsClient {
 public:
  // rcvbuf > 0 sets SO_RCVBUF before connecting (a small window). headers:
  // added to the upgrade request (Origin, Authorization); target: with a
  // query (api_key=...).
  explicit WsClient(uint16_t port, int rcvbuf = 0, const Headers& headers = {},
                    const std::string& target = "/v1/ws")
      : ws_(ioc_) {
    auto& sock = ws_.next_layer();
    sock.open(boost::asio::ip::tcp::v4());
    if (rcvbuf > 0) ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    decorate(headers);
    ws_.handshake("127.0.0.1:" + std::to_string(port), target);
  }

  // The server's answer to an upgrade of `target` with these extra headers
  // (101 when it was accepted), without throwing when it is refused.
  static boost::beast::websocket::response_type try_upgrade(uint16_t port, const Headers& headers,
                                                            const std::string& target = "/v1/ws") {
    WsClient c;
    c.ws_.next_layer().connect({boost::asio::ip::make_address("127.0.0.1"), port});
    c.decorate(headers);
    boost::beast::websocket::response_type res;
    boost::beast::error_code ec;
    c.ws_.handshake(res, "127.0.0.1:" + std::to_string(port), target, ec);
    return res;
  }

  void send(const nlohmann::json& msg) { ws_.write(boost::asio::buffer(msg.dump())); }
  void send_text(const std::string& text) { ws_.write(boost::asio::buffer(text)); }

  // The next message; throws std::runtime_error on timeout or close.
  nlohmann::json read(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    boost::beast::error_code ec;
    bool done = false;
    ws_.async_read(buf_, [&](boost::beast::error_code e, size_t) {
      ec = e;
      done = true;
    });
    ioc_.restart();
    ioc_.run_for(timeout);
    if (!done) {
      boost::beast::error_code ignored;
      ws_.next_layer().cancel(ignored);
      ioc_.restart();
      ioc_.run();
      throw std::runtime_error("WebSocket read timed out");
    }
    if (ec) throw std::runtime_error("WebSocket read failed: " + ec.message());
    std::string text = boost::beast::buffers_to_string(buf_.data());
    buf_.consume(buf_.size());
    return nlohmann::json::parse(text);
  }

  // The close frame the server sent (after a read failed with "closed").
  boost::beast::websocket::close_reason close_reason() const { return ws_.reason(); }

  // A close frame (the client leaves on purpose).
  void close() {
    boost::beast::error_code ignored;
    ws_.close(boost::beast::websocket::close_code::going_away, ignored);
  }
  // A close frame written straight to the socket: no close handshake is
  // awaited and nothing more is read (a client that leaves and stops
  // reading; the socket stays open until drop() or destruction).
  void send_close_frame_only() {
    // FIN + opcode 0x8, masked, 2-byte payload (close code 1001) with a zero
    // mask key (RFC 6455 section 5.2: client frames must be masked).
    const unsigned char frame[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE9};
    // Sent at once, not held by Nagle behind unacknowledged data (a reset()
    // right after would discard it unsent).
    ws_.next_layer().set_option(boost::asio::ip::tcp::no_delay(true));
    boost::asio::write(ws_.next_layer(), boost::asio::buffer(frame, sizeof frame));
  }
  // One text frame holding `payload` (under 126 bytes) as given, written
  // straight to the socket: Beast's own writer would not send a text
  // message that is not UTF-8.
  void send_raw_text_frame(const std::string& payload) {
    // FIN + opcode 0x1, masked with a zero key (RFC 6455 section 5.2).
    std::string frame = {'\x81', static_cast<char>(0x80 | payload.size()), 0, 0, 0, 0};
    frame += payload;
    boost::asio::write(ws_.next_layer(), boost::asio::buffer(frame));
  }
  // The socket closed with a reset (SO_LINGER 0: RST, not FIN), as a
  // kernel does when its client closes with unread data.
  void reset() {
    ::linger l{1, 0};
    ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    boost::beast::error_code ignored;
    ws_.next_layer().close(ignored);
  }
  // An abrupt loss: the TCP connection goes away without a close frame.
  void drop() {
    boost::beast::error_code ignored;
    ws_.next_layer().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    ws_.next_layer().close(ignored);
  }

 private:
  WsClient() : ws_(ioc_) {}  // not connected (try_upgrade)
  void decorate(const Headers& headers) {
    ws_.set_option(boost::beast::websocket::stream_base::decorator(
        [headers](boost::beast::websocket::request_type& req) {
          for (const auto& [k, v] : headers) req.set(k, v);
        }));
  }

  boost::asio::io_context ioc_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_;
  boost::beast::flat_buffer buf_;
};

}  // namespace pagoda::testing_http
