// HttpServer: the listening socket and the io_context its sessions run on,
// driven by N network threads (--network-threads). Each accepted connection
// gets its own strand (HttpSession).
//
// Accepting:
//   - ServerLimits::max_connections (--max-connections) bounds the open
//     connections; one beyond it is answered 503 and closed
//     (ConnectionLimit, reject_over_limit).
//   - A failed accept other than a client's own abort/reset (EMFILE, ENFILE,
//     ENOBUFS, ENOMEM: the process ran out of descriptors or memory) retries
//     after a back-off of 50 ms, doubling up to 1 s, reset by the next
//     successful accept: the pending connection stays in the kernel's
//     backlog until descriptors free up, instead of the loop spinning.
//   - Accept errors and rejections are logged at most once per 5 s, each
//     line counting the ones not logged since the previous line.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/connection_limit.h"
#include "server/server_context.h"

namespace pagoda {

class HttpServer {
 public:
  // Binds host:port (port 0: the OS picks a free one) and listens. Throws
  // std::runtime_error naming the address when that fails. ctx must
  // outlive the server.
  HttpServer(const ServerContext& ctx, const std::string& host, uint16_t port, int num_threads);
  ~HttpServer();  // stop() + join

  uint16_t port() const { return port_; }  // the bound port
  size_t open_connections() const { return limit_.open(); }
  boost::asio::io_context& io_context() { return ioc_; }

  // Starts accepting and the network threads; returns at once.
  void start();
  // Closes the listening socket (any thread); open connections go on.
  void stop_accepting();
  // Stops accepting and the io_context (any thread, handlers included);
  // pending connections are dropped when the server is destroyed.
  void stop();
  // Blocks until the network threads have exited (after stop()).
  void join();

 private:
  // At most one line per kLogInterval, counting the events not logged
  // (acceptor strand only).
  struct RateLimitedLog {
    std::chrono::steady_clock::time_point last{};
    size_t unlogged = 0;
    // True when this event is to be logged; `unlogged` then holds how many
    // were not since the previous line.
    bool due();
  };

  void do_accept();
  void on_accept_error(const boost::system::error_code& ec);
  void accept_after_backoff();

  const ServerContext& ctx_;
  // Declared before ioc_: sessions holding slots go with the io_context.
  ConnectionLimit limit_;
  ConnectionLimit rejecting_;  // 503 answers in progress
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_timer_;  // the back-off after a failed accept
  std::chrono::milliseconds accept_backoff_{0};
  RateLimitedLog accept_log_, reject_log_;
  uint16_t port_ = 0;
  int num_threads_;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda
