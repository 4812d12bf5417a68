#include "server/http_server.h"

#include <stdexcept>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/http_session.h"

namespace pagoda {

namespace net = boost::asio;
using tcp = net::ip::tcp;

HttpServer::HttpServer(const ServerContext& ctx, const std::string& host, uint16_t port, int num_threads)
    : ctx_(ctx), ioc_(num_threads > 0 ? num_threads : 1), acceptor_(net::make_strand(ioc_)),
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

void HttpServer::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      spdlog::warn("accept failed: {}", ec.message());
    } else {
      std::make_shared<HttpSession>(std::move(socket), ctx_)->start();
    }
    do_accept();
  });
}

}  // namespace pagoda
