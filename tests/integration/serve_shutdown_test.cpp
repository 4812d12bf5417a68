// Graceful shutdown of `pagoda serve` (SIGTERM / SIGINT; server/connection_drain.h):
// every open stream gets a proper end instead of a dropped connection.
//  - SSE: a last chunk with finish_reason "abort", `data: [DONE]`, the
//    chunked-encoding terminator, then the server closes;
//  - WebSocket with a running request: its `done` message (finish_reason
//    "abort"), then a close frame 1001 "going away" (RFC 6455 section 7.4.1);
//  - an idle WebSocket: the close frame 1001; an idle keep-alive HTTP
//    connection: closed;
//  - the process exits with status 0.
// The requests are long (2000 tokens, ignore_eos) and each has produced
// output before the signal, so they are running when it arrives.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/integration/http_client.h"
#include "tests/integration/serve_test_util.h"
#include "tests/integration/server_process.h"
#include "tests/integration/ws_client.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

// Raw bytes until the server closes the connection.
std::string read_to_eof(HttpClient& c) {
  std::string got;
  char buf[4096];
  for (;;) {
    boost::system::error_code ec;
    size_t n = c.socket().read_some(boost::asio::buffer(buf), ec);
    got.append(buf, n);
    if (ec == boost::asio::error::eof) return got;
    if (ec) throw boost::system::system_error(ec);
  }
}

TEST(ServeShutdown, SigtermEndsOpenStreamsWithAbortAndDoneThenClosesEveryConnection) {
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--network-threads", "2"});
  const json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 2000},
                     {"ignore_eos", true},
                     {"temperature", 0}};

  // An SSE stream, read up to its first token.
  HttpClient sse(server.port());
  json sb = body;
  sb["stream"] = true;
  sse.send(boost::beast::http::verb::post, "/v1/completions", sb.dump());
  std::string sse_bytes = sse.read_until("\"text\":");

  // A WebSocket request, read up to its first delta.
  WsClient ws(server.port());
  json wb = body;
  wb["type"] = "completion";
  wb["id"] = "long";
  ws.send(wb);
  json first = ws.read();
  ASSERT_EQ(first["type"], "delta") << first.dump();

  // Idle connections: a WebSocket and a keep-alive HTTP one (after a request).
  WsClient idle_ws(server.port());
  HttpClient idle_http(server.port());
  ASSERT_EQ(idle_http.get("/health").status, 200);

  server.signal(SIGTERM);

  // SSE: the rest of the stream ends properly, then EOF.
  sse_bytes += read_to_eof(sse);
  EXPECT_NE(sse_bytes.find("\"finish_reason\":\"abort\""), std::string::npos)
      << sse_bytes.substr(0, 300);
  const size_t done = sse_bytes.find("data: [DONE]\n\n");
  ASSERT_NE(done, std::string::npos)
      << sse_bytes.substr(sse_bytes.size() > 300 ? sse_bytes.size() - 300 : 0);
  EXPECT_EQ(sse_bytes.substr(sse_bytes.size() - 5), "0\r\n\r\n") << "chunked body not terminated";

  // WebSocket: the remaining deltas, the done (abort), then a 1001 close.
  json m;
  do {
    m = ws.read();
  } while (m["type"] == "delta");
  EXPECT_EQ(m["type"], "done") << m.dump();
  EXPECT_EQ(m["id"], "long");
  EXPECT_EQ(m["finish_reason"], "abort");
  EXPECT_LT(m["usage"]["completion_tokens"].get<int>(), 2000);
  EXPECT_THROW(ws.read(), std::runtime_error);
  EXPECT_EQ(ws.close_reason().code, boost::beast::websocket::close_code::going_away);

  EXPECT_THROW(idle_ws.read(), std::runtime_error);
  EXPECT_EQ(idle_ws.close_reason().code, boost::beast::websocket::close_code::going_away);
  EXPECT_EQ(read_to_eof(idle_http), "");

  const int status = server.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace pagoda::testing_http

namespace pagoda::testing_http {
namespace {

// --shutdown-timeout (vLLM's flag): after SIGTERM, running requests may
// finish for up to that many seconds; new requests and /health get 503
// meanwhile; what is still running then is aborted. A second signal ends
// the process at once with 128 + signal.

const json kLong = {{"prompt", "Once upon a time"},
                    {"max_tokens", 2000},
                    {"ignore_eos", true},
                    {"temperature", 0},
                    {"stream", true}};

// Polls /health on fresh connections until it answers 503 (the drain has
// begun: the signal was handled); returns that response.
HttpResponse wait_health_503(uint16_t port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    HttpClient c(port);
    HttpResponse r = c.get("/health");
    if (r.status == 503 || std::chrono::steady_clock::now() > deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(ServeShutdownTimeout, StreamThatFinishesWithinTheTimeoutCompletesNormally) {
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--shutdown-timeout", "600"});
  HttpClient sse(server.port());
  json body = kLong;
#ifdef PAGODA_SANITIZE
  body["max_tokens"] = 150;  // still seconds of work under ASan (2000 took minutes)
#endif
  sse.send(boost::beast::http::verb::post, "/v1/completions", body.dump());
  std::string bytes = sse.read_until("\"text\":");
  server.signal(SIGTERM);
  bytes += read_to_eof(sse);
  EXPECT_NE(bytes.find("\"finish_reason\":\"length\""), std::string::npos)
      << bytes.substr(bytes.size() - 300);
  EXPECT_EQ(bytes.find("\"finish_reason\":\"abort\""), std::string::npos);
  EXPECT_NE(bytes.find("data: [DONE]\n\n"), std::string::npos);
  const int status = server.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ServeShutdownTimeout, WhileDrainingNewRequestsGet503AndWhatCannotFinishIsAbortedAtTheTimeout) {
  // 32 prompts x 2000 tokens in one stream: far more than 3 s of work
  // (one 2000-token stream alone takes ~10 s on the dev box).
  json body = kLong;
  body["prompt"] = json::array();
  for (int i = 0; i < 32; ++i) body["prompt"].push_back(std::string("Once upon a time ").append(std::to_string(i)));
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--shutdown-timeout", "3"});
  HttpClient sse(server.port());
  sse.send(boost::beast::http::verb::post, "/v1/completions", body.dump());
  std::string bytes = sse.read_until("\"text\":");
  const auto signalled = std::chrono::steady_clock::now();
  server.signal(SIGTERM);

  HttpResponse h = wait_health_503(server.port());  // new connections are still accepted
  EXPECT_EQ(h.status, 503) << h.body;
  HttpClient late(server.port());
  HttpResponse r = late.post("/v1/completions",
                             json{{"prompt", "hi"}, {"max_tokens", 2}, {"stream", true}}.dump());
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "The server is shutting down");

  bytes += read_to_eof(sse);
  const double aborted_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  EXPECT_NE(bytes.find("\"finish_reason\":\"abort\""), std::string::npos)
      << bytes.substr(bytes.size() - 300);
  EXPECT_NE(bytes.find("data: [DONE]\n\n"), std::string::npos);
  EXPECT_GE(aborted_after, 2.9);  // the requests ran for the whole timeout first
  const int status = server.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ServeShutdownTimeout, SecondSigtermExitsAtOnceWith143) {
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--shutdown-timeout", "600"});
  HttpClient sse(server.port());
  json body = kLong;
  body["prompt"] = json::array();
  for (int i = 0; i < 32; ++i) body["prompt"].push_back(std::string("Once upon a time ").append(std::to_string(i)));
  sse.send(boost::beast::http::verb::post, "/v1/completions", body.dump());
  sse.read_until("\"text\":");
  server.signal(SIGTERM);
  ASSERT_EQ(wait_health_503(server.port()).status, 503);  // the first signal was handled
  server.signal(SIGTERM);
  const int status = server.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
}

}  // namespace
}  // namespace pagoda::testing_http
