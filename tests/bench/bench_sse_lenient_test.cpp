// loadtest/common SseReader's lenient framing (SseFraming::kLenient, what
// pagoda-bench reads any server's stream with), against raw bytes written
// by a loopback server thread: CRLF and LF line ends, "data:" with and
// without the space, comments, event:/id: fields, multi-line data, an
// event without data, and a last event the connection close ends.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <thread>

#include "loadtest/common/http_client.h"

namespace pagoda::loadtest {
namespace {

// Serves one connection: reads the request's header, writes `response`,
// closes. Returns every event payload the lenient reader delivered.
std::vector<std::string> read_events(const std::string& response) {
  net::io_context server_ctx;
  net::ip::tcp::acceptor acceptor(server_ctx, {net::ip::make_address("127.0.0.1"), 0});
  std::thread server([&] {
    net::ip::tcp::socket s(server_ctx);
    acceptor.accept(s);
    std::string request;
    net::read_until(s, net::dynamic_buffer(request), "\r\n\r\n");
    net::write(s, net::buffer(response));
    s.shutdown(net::ip::tcp::socket::shutdown_both);
  });
  std::vector<std::string> events;
  net::io_context ioc;
  std::exception_ptr error;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        beast::tcp_stream stream(ioc);
        beast::flat_buffer buffer;
        co_await connect(stream, acceptor.local_endpoint(), std::chrono::seconds(10));
        auto req = make_request(http::verb::post, "/v1/completions", "{}");
        co_await send(stream, req, std::chrono::seconds(10));
        SseReader reader(stream, buffer, SseFraming::kLenient);
        EXPECT_EQ(co_await reader.read_header(std::chrono::seconds(10)), 200);
        while (auto e = co_await reader.next(std::chrono::seconds(10))) events.push_back(*e);
      },
      [&](std::exception_ptr e) { error = e; });
  ioc.run();
  server.join();
  if (error) std::rethrow_exception(error);
  return events;
}

TEST(BenchSseLenient, ReadsTheSseGrammar) {
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
  const std::string body =
      ": a comment\r\n\r\n"                          // no data: no event
      "data: {\"a\":1}\r\n\r\n"                      // CRLF
      "data:{\"b\":2}\n\n"                           // no space after the colon
      "event: message\nid: 7\ndata: x\ndata: y\n\n"  // fields skipped; data lines joined
      "retry: 10\n\n"                                // no data: no event
      "data: [DONE]";                                // ended by the close, no blank line
  EXPECT_EQ(read_events(head + body),
            (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "x\ny", "[DONE]"}));
}

TEST(BenchSseLenient, ChunkedBodyWhoseChunksCutLines) {
  // Pagoda's framing: chunked; chunk boundaries inside a line and inside
  // a "\r\n" (Beast joins the chunks' data into the body the reader parses).
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto chunk = [](const std::string& s) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", s.size());
    return size + s + "\r\n";
  };
  const std::string body = chunk("data: he") + chunk("llo\r") + chunk("\n\r\ndata: [DO") +
                           chunk("NE]\r\n\r\n") + "0\r\n\r\n";
  EXPECT_EQ(read_events(head + body), (std::vector<std::string>{"hello", "[DONE]"}));
}

}  // namespace
}  // namespace pagoda::loadtest
