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

#include <nlohmann/json.hpp>

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
