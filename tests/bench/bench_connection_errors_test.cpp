// A server that closes the connection early, or answers what is not HTTP:
// the request's error says so in words (the summary's error list and the
// initial test run print it), not Beast's bare "partial message" / "end of
// stream" / "End of file" / "bad version" / "bad chunk".
#include <gtest/gtest.h>

#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <string>

#include "loadtest/bench/runner.h"
#include "tests/bench/drip_server.h"

namespace pagoda::bench {
namespace {

namespace beast = boost::beast;
using Socket = net::ip::tcp::socket;

// The whole request, body included: a socket closed with unread bytes
// would send a reset instead of the end of stream under test.
void read_request(Socket& s) {
  beast::flat_buffer buffer;
  beast::http::request<beast::http::string_body> req;
  beast::http::read(s, buffer, req);
}

// Runs one request against a server that does `serve` and returns its error.
std::string error_of(Backend b, std::function<void(Socket&)> serve) {
  DripServer server([serve](Socket& s, std::atomic<bool>&) { serve(s); });
  RequestResult r = run_one(drip_sample(), drip_config(b, server.port()));
  EXPECT_FALSE(r.success);
  return r.error;
}

const std::string kClosedEarly = "server closed the connection before the response was complete";

TEST(BenchConnectionErrors, ClosedBeforeAnyResponse) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    s.close();
  });
  EXPECT_EQ(e, "server closed the connection without sending a response (end of stream)");
}

TEST(BenchConnectionErrors, ClosedInsideTheHeader) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Ty")));
    s.close();
  });
  EXPECT_EQ(e, kClosedEarly + " (partial message)");
}

TEST(BenchConnectionErrors, ClosedInsideAChunkedStream) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string(
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n"
                      "2b\r\ndata: {\"id\":\"c\",\"choices\":[{\"text\":\"a\"}]}\n\n\r\n"
                      "40\r\ndata: {\"id\"")));
    s.close();
  });
  EXPECT_EQ(e, kClosedEarly + " (partial message)");
}

TEST(BenchConnectionErrors, ClosedInsideAnErrorBody) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string("HTTP/1.1 500 Internal Server Error\r\n"
                                          "Content-Length: 100\r\n\r\n{\"error\"")));
    s.close();
  });
  EXPECT_EQ(e, kClosedEarly + " (partial message)");
}

TEST(BenchConnectionErrors, WebSocketClosedWithoutACloseFrame) {
  const std::string e = error_of(Backend::kPagodaWs, [](Socket& s) {
    beast::websocket::stream<Socket&> ws(s);
    ws.accept();
    beast::flat_buffer buffer;
    ws.read(buffer);  // the completion message
    s.close();
  });
  EXPECT_EQ(e, kClosedEarly + " (End of file)");
}

TEST(BenchConnectionErrors, WebSocketClosedDuringTheHandshake) {
  const std::string e = error_of(Backend::kPagodaWs, [](Socket& s) {
    read_request(s);
    s.close();
  });
  EXPECT_EQ(e, "server closed the connection without sending a response (end of stream)");
}

const std::string kMalformed = "malformed HTTP response from the server: ";

TEST(BenchConnectionErrors, MalformedStatusLine) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string("HTTX/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")));
    s.close();
  });
  EXPECT_EQ(e, kMalformed + "bad version");
}

TEST(BenchConnectionErrors, MalformedChunk) {
  const std::string e = error_of(Backend::kOpenAI, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                          "Transfer-Encoding: chunked\r\n\r\nzz\r\n")));
    s.close();
  });
  EXPECT_EQ(e, kMalformed + "bad chunk");
}

TEST(BenchConnectionErrors, WebSocketHandshakeAnsweredWithWhatIsNotHttp) {
  const std::string e = error_of(Backend::kPagodaWs, [](Socket& s) {
    read_request(s);
    net::write(s, net::buffer(std::string("HTTX/1.1 101 Switching Protocols\r\n\r\n")));
    s.close();
  });
  EXPECT_EQ(e, kMalformed + "bad version");
}

}  // namespace
}  // namespace pagoda::bench
