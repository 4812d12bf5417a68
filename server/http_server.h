// HttpServer: the listening socket and the io_context its sessions run on,
// driven by N network threads (--network-threads). Each accepted connection
// gets its own strand (HttpSession).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

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
  void do_accept();

  const ServerContext& ctx_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  int num_threads_;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda
