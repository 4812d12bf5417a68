// A one-connection loopback server for pagoda-bench's client tests
// (tests/bench): each test scripts what the server does with the bytes.
#pragma once
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "loadtest/bench/runner.h"

namespace pagoda::bench {

namespace net = boost::asio;

// A loopback server on its own thread that serves one connection with
// `serve` until the client goes away or stop is set.
class DripServer {
 public:
  explicit DripServer(std::function<void(net::ip::tcp::socket&, std::atomic<bool>&)> serve)
      : acceptor_(ctx_, {net::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, serve] {
      net::ip::tcp::socket s(ctx_);
      acceptor_.accept(s);
      try {
        serve(s, stop_);
      } catch (const std::exception&) {
        // the client closed the connection: done
      }
    });
  }
  ~DripServer() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  net::io_context ctx_;
  net::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A run against a DripServer on `port`: backend b's default endpoint,
// model "m", no progress bar, the given request timeout.
inline RunConfig drip_config(Backend b, uint16_t port,
                             std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  RunConfig cfg;
  cfg.backend = b;
  cfg.endpoint.address = {net::ip::make_address("127.0.0.1"), port};
  cfg.endpoint.host = "127.0.0.1";
  cfg.endpoint.path = default_endpoint(b);
  cfg.endpoint.timeout = timeout;
  cfg.options.model = "m";
  cfg.progress = false;
  return cfg;
}

// A 3-token prompt expecting 4 tokens back.
inline SampleRequest drip_sample() {
  SampleRequest s;
  s.prompt = "Once upon";
  s.prompt_len = 3;
  s.expected_output_len = 4;
  return s;
}

}  // namespace pagoda::bench
