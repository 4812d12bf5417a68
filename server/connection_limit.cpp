#include "server/connection_limit.h"

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "server/openai_error.h"

namespace pagoda {

namespace net = boost::asio;
using tcp = net::ip::tcp;

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& o) noexcept {
  if (this != &o) {
    release();
    limit_ = o.limit_;
    o.limit_ = nullptr;
  }
  return *this;
}

void ConnectionSlot::release() {
  if (limit_) limit_->open_.fetch_sub(1, std::memory_order_relaxed);
  limit_ = nullptr;
}

ConnectionSlot ConnectionLimit::try_acquire() {
  size_t n = open_.load(std::memory_order_relaxed);
  do {
    if (max_ != 0 && n >= max_) return ConnectionSlot();
  } while (!open_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  return ConnectionSlot(this);
}

namespace {

// How long a rejected client gets to read the 503 and close its side.
constexpr std::chrono::seconds kLinger{1};

class Rejection : public std::enable_shared_from_this<Rejection> {
 public:
  Rejection(tcp::socket&& socket, size_t max, ConnectionSlot slot)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), slot_(std::move(slot)) {
    OpenAIError e = make_error(
        503, fmt::format("Too many connections: the server's limit of {} open connections "
                         "(--max-connections) is reached; retry later",
                         max));
    std::string body = e.body();
    out_ = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
        "{}\r\n"
        "Retry-After: 1\r\nConnection: close\r\n\r\n{}",
        body.size(), body);
  }

  void start() {
    timer_.expires_after(kLinger);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->close();
    });
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       if (ec) return self->close();
                       boost::system::error_code ignored;
                       self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                       self->discard();
                     });
  }

 private:
  void discard() {
    socket_.async_read_some(net::buffer(sink_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->discard();
                            });
  }
  void close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  ConnectionSlot slot_;
  std::string out_;
  std::array<char, 4096> sink_{};
};

}  // namespace

void reject_over_limit(tcp::socket&& socket, size_t max, ConnectionSlot slot) {
  std::make_shared<Rejection>(std::move(socket), max, std::move(slot))->start();
}

}  // namespace pagoda
