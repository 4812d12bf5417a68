#include "server/http_server.h"

#include <algorithm>
#include <stdexcept>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/http_session.h"

namespace pagoda {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr std::chrono::seconds kLogInterval{5};
constexpr std::chrono::milliseconds kFirstBackoff{50};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
// 503 answers in flight at once; a connection beyond that (a flood) is
// closed without one.
constexpr size_t kMaxRejecting = 256;

// A failure of the one pending connection (the client gave up before the
// accept): retried at once. Anything else is the server's (descriptors,
// memory) and backs off.
bool client_side_accept_error(const boost::system::error_code& ec) {
  return ec == net::error::connection_aborted || ec == net::error::connection_reset;
}
}  // namespace

HttpServer::HttpServer(const ServerContext& ctx, const std::string& host, uint16_t port,
                       int num_threads)
    : ctx_(ctx),
      limit_(ctx.limits.max_connections),
      rejecting_(kMaxRejecting),
      ioc_(num_threads > 0 ? num_threads : 1),
      acceptor_(net::make_strand(ioc_)),
      accept_timer_(acceptor_.get_executor()),
      num_threads_(num_threads > 0 ? num_threads : 1) {
  boost::system::error_code ec;
  tcp::resolver resolver(ioc_);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty())
    throw std::runtime_error(fmt::format("cannot resolve host '{}': {}", host, ec.message()));
  tcp::endpoint endpoint = results.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  port_ = acceptor_.local_endpoint().port();
}

HttpServer::~HttpServer() {
  stop();
  join();
}

void HttpServer::start() {
  net::post(acceptor_.get_executor(), [this] { do_accept(); });
  for (int i = 0; i < num_threads_; ++i)
    threads_.emplace_back([this] {
      // An exception escaping a handler fails that connection alone; the
      // network thread goes back to serving (Asio's recommended pattern).
      for (;;) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("network thread: unhandled exception in a connection handler: {}", e.what());
        }
      }
    });
}

void HttpServer::stop_accepting() {
  net::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_timer_.cancel();
  });
}

void HttpServer::stop() {
  stop_accepting();
  ioc_.stop();
}

void HttpServer::join() {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool HttpServer::RateLimitedLog::due() {
  auto now = std::chrono::steady_clock::now();
  if (last != std::chrono::steady_clock::time_point{} && now - last < kLogInterval) {
    ++unlogged;
    return false;
  }
  last = now;
  return true;
}

void HttpServer::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) return on_accept_error(ec);
    accept_backoff_ = std::chrono::milliseconds(0);
    if (ConnectionSlot slot = limit_.try_acquire()) {
      std::make_shared<HttpSession>(std::move(socket), ctx_, std::move(slot))->start();
    } else {
      if (reject_log_.due()) {
        spdlog::warn(
            "Connection refused with 503: {} connections open (--max-connections){}", limit_.max(),
            reject_log_.unlogged
                ? fmt::format("; {} more refused since the last message", reject_log_.unlogged)
                : std::string());
        reject_log_.unlogged = 0;
      }
      if (ConnectionSlot r = rejecting_.try_acquire()) {
        reject_over_limit(std::move(socket), limit_.max(), std::move(r));
      } else {
        boost::system::error_code ignored;
        socket.close(ignored);
      }
    }
    do_accept();
  });
}

void HttpServer::on_accept_error(const boost::system::error_code& ec) {
  const bool backoff = !client_side_accept_error(ec);
  if (backoff) accept_backoff_ = std::clamp(accept_backoff_ * 2, kFirstBackoff, kMaxBackoff);
  if (accept_log_.due()) {
    spdlog::warn(
        "accept failed: {}{}{}", ec.message(),
        accept_log_.unlogged
            ? fmt::format(" ({} more failed accepts since the last message)", accept_log_.unlogged)
            : std::string(),
        backoff ? fmt::format("; retrying in {} ms", accept_backoff_.count()) : std::string());
    accept_log_.unlogged = 0;
  }
  if (!backoff) return do_accept();
  accept_after_backoff();
}

void HttpServer::accept_after_backoff() {
  accept_timer_.expires_after(accept_backoff_);
  accept_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || !acceptor_.is_open()) return;
    do_accept();
  });
}

}  // namespace pagoda
