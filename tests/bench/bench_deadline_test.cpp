// --request-timeout is a deadline for a request's whole exchange (vLLM's
// aiohttp ClientTimeout(total=...)), not for each wait: a server that
// keeps a stream alive forever (SSE comments every 50 ms; WebSocket
// messages the backend ignores) must not keep the request alive past it.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <thread>

#include "loadtest/bench/runner.h"
#include "tests/bench/drip_server.h"

namespace pagoda::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;

TEST(BenchDeadline, SseCommentsForeverEndAtTheTimeout) {
  DripServer server([](net::ip::tcp::socket& s, std::atomic<bool>& stop) {
    std::string request;
    net::read_until(s, net::dynamic_buffer(request), "\r\n\r\n");
    net::write(s, net::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                          "Connection: close\r\n\r\n")));
    // One output chunk, then comments every 50 ms: each wait is short.
    net::write(s,
               net::buffer(std::string("data: {\"id\":\"c\",\"choices\":[{\"text\":\"a\"}]}\n\n")));
    while (!stop) {
      net::write(s, net::buffer(std::string(": ping\n\n")));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto t0 = Clock::now();
  RequestResult r = run_one(
      drip_sample(), drip_config(Backend::kOpenAI, server.port(), std::chrono::milliseconds(400)));
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  EXPECT_GE(took, 0.39);
  EXPECT_LT(took, 3.0);
}

TEST(BenchDeadline, WebSocketMessagesForeverEndAtTheTimeout) {
  DripServer server([](net::ip::tcp::socket& s, std::atomic<bool>& stop) {
    beast::websocket::stream<net::ip::tcp::socket&> ws(s);
    ws.accept();
    beast::flat_buffer buffer;
    ws.read(buffer);  // the completion message
    ws.text(true);
    ws.write(net::buffer(std::string(R"({"type":"delta","id":"x","seq":1,"index":0,"text":"a"})")));
    while (!stop) {  // a message type the backend ignores, every 50 ms
      ws.write(net::buffer(std::string(R"({"type":"stats","time":1})")));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto t0 = Clock::now();
  RequestResult r = run_one(drip_sample(), drip_config(Backend::kPagodaWs, server.port(),
                                                       std::chrono::milliseconds(400)));
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  EXPECT_GE(took, 0.39);
  EXPECT_LT(took, 3.0);
}

// A request that completes within the deadline is unaffected.
TEST(BenchDeadline, AFastRequestCompletes) {
  DripServer server([](net::ip::tcp::socket& s, std::atomic<bool>&) {
    std::string request;
    net::read_until(s, net::dynamic_buffer(request), "\r\n\r\n");
    net::write(s,
               net::buffer(std::string(
                   "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                   "data: {\"id\":\"c\",\"choices\":[{\"text\":\"a\"}]}\n\n"
                   "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                   "\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")));
    s.shutdown(net::ip::tcp::socket::shutdown_both);
  });
  RequestResult r = run_one(
      drip_sample(), drip_config(Backend::kOpenAI, server.port(), std::chrono::milliseconds(5000)));
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.prompt_tokens, 3);
}

}  // namespace
}  // namespace pagoda::bench
