// Who may open /v1/ws (access_control.h): browsers send an Origin on every
// WebSocket handshake and apply no CORS to it, so the server checks it: a
// page of another origin is refused with 403 unless --allowed-origins lists
// it; the server's own pages (Origin's host:port = Host, the bundled chat
// UI) and clients that send no Origin are let in. --api-key applies to the
// upgrade too (Authorization header, or api_key=<key> in the query, which
// is how the chat UI authenticates: a browser WebSocket cannot set headers).
#include <gtest/gtest.h>

#include <string>

#include "engine/engine.h"
#include "engine_test_fakes.h"
#include "server/access_control.h"
#include "server/engine_handle.h"
#include "server/http_server.h"
#include "server/ws_stream.h"
#include "tests/integration/ws_client.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_http::Headers;
using testing_http::WsClient;

TEST(ServerWsAccess, OriginRules) {
  AccessPolicy p;
  // No Origin: not a browser.
  EXPECT_TRUE(websocket_origin_ok(p, "", "127.0.0.1:8000"));
  // Same origin: host and port equal the Host header's.
  EXPECT_TRUE(websocket_origin_ok(p, "http://127.0.0.1:8000", "127.0.0.1:8000"));
  EXPECT_TRUE(websocket_origin_ok(p, "http://LocalHost:8000", "localhost:8000"));
  EXPECT_TRUE(websocket_origin_ok(p, "https://example.com", "example.com"));
  EXPECT_TRUE(websocket_origin_ok(p, "https://example.com", "example.com:443"));
  EXPECT_TRUE(websocket_origin_ok(p, "http://example.com", "example.com:80"));
  EXPECT_TRUE(websocket_origin_ok(p, "http://[::1]:8000", "[::1]:8000"));
  // Another port, host or scheme default port: another origin.
  EXPECT_FALSE(websocket_origin_ok(p, "http://127.0.0.1:8001", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "http://evil.example", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "http://evil.example:8000", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "https://example.com", "example.com:80"));
  EXPECT_FALSE(websocket_origin_ok(p, "http://127.0.0.1:8000", ""));
  EXPECT_FALSE(websocket_origin_ok(p, "null", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "http://127.0.0.1:8000@evil.example", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "file://", ""));
  // --allowed-origins, as for CORS.
  p.allowed_origins = {"https://good.example"};
  EXPECT_TRUE(websocket_origin_ok(p, "https://good.example", "127.0.0.1:8000"));
  EXPECT_FALSE(websocket_origin_ok(p, "https://evil.example", "127.0.0.1:8000"));
  EXPECT_TRUE(websocket_origin_ok(p, "http://127.0.0.1:8000", "127.0.0.1:8000"));
  p.allowed_origins = {"*"};
  EXPECT_TRUE(websocket_origin_ok(p, "https://evil.example", "127.0.0.1:8000"));
}

EngineConfig quiet() {
  EngineConfig cfg;
  cfg.log_stats = false;
  return cfg;
}

class ServerWsAccessTest : public ::testing::Test {
 protected:
  // The engine stops before the server goes (a request's output callback
  // holds its session's executor).
  void TearDown() override { engine_.stop(); }
  void start(AccessPolicy access) {
    engine_.start();
    handle_.set_running(true);
    ctx_.model = model_;
    ctx_.engine = &handle_;
    ctx_.streams = &streams_;
    ctx_.access = std::move(access);
    server_ = std::make_unique<HttpServer>(ctx_, "127.0.0.1", 0, 2);
    server_->start();
    host_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  // The upgrade's status and, when refused, its OpenAI error JSON.
  std::pair<int, json> upgrade(const Headers& headers, const std::string& target = "/v1/ws") {
    auto res = WsClient::try_upgrade(server_->port(), headers, target);
    json body = res.result_int() == 101 ? json() : json::parse(res.body());
    return {res.result_int(), body};
  }
  // A completion over an accepted socket streams to its end.
  void completes(WsClient& ws) {
    ws.send(json{{"type", "completion"}, {"id", "c"}, {"prompt", "hi"}, {"max_tokens", 2}});
    for (;;) {
      json m = ws.read();
      ASSERT_NE(m["type"], "error") << m.dump();
      if (m["type"] == "done") break;
    }
  }

  ServingModel model_ = testing_protocol::make_test_model();
  Engine engine_{quiet(), std::make_unique<testing::FakeExecutor>(259, 64, 4), model_.tokenizer};
  EngineAdapter handle_{engine_};
  StreamHub streams_{std::chrono::milliseconds(0)};
  ServerContext ctx_;
  std::unique_ptr<HttpServer> server_;
  std::string host_;
};

TEST_F(ServerWsAccessTest, AnotherOriginIsRefusedWith403AndTheServersOwnPagesAreLetIn) {
  start(AccessPolicy{});
  auto [status, body] = upgrade({{"Origin", "http://evil.example"}});
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body["error"]["type"], "PermissionDeniedError") << body.dump();
  EXPECT_EQ(body["error"]["code"], 403);
  const std::string msg = body["error"]["message"];
  EXPECT_NE(msg.find("http://evil.example"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--allowed-origins"), std::string::npos) << msg;
  // Same port number on another host is still another origin.
  EXPECT_EQ(upgrade({{"Origin", "http://evil.example:" + std::to_string(server_->port())}}).first,
            403);
  // The chat UI's page: Origin http://<Host>.
  WsClient same(server_->port(), 0, {{"Origin", "http://" + host_}});
  completes(same);
  // No Origin (a program, not a browser page).
  WsClient plain(server_->port());
  completes(plain);
}

TEST_F(ServerWsAccessTest, AllowedOriginsOpenTheSocketToThoseOriginsOnly) {
  AccessPolicy p;
  p.allowed_origins = {"https://good.example"};
  start(p);
  EXPECT_EQ(upgrade({{"Origin", "https://evil.example"}}).first, 403);
  WsClient good(server_->port(), 0, {{"Origin", "https://good.example"}});
  completes(good);
}

TEST_F(ServerWsAccessTest, TheApiKeyIsNeededInTheHeaderOrTheQuery) {
  AccessPolicy p;
  p.api_key = "s3cret";
  start(p);
  const Headers same = {{"Origin", "http://" + host_}};
  auto [status, body] = upgrade(same);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(body["error"]["type"], "AuthenticationError") << body.dump();
  EXPECT_EQ(upgrade(same, "/v1/ws?api_key=wrong").first, 401);
  // A foreign page is refused whatever key it sends.
  EXPECT_EQ(upgrade({{"Origin", "http://evil.example"}}, "/v1/ws?api_key=s3cret").first, 403);
  // The chat UI's way: same origin, the key in the query.
  WsClient ui(server_->port(), 0, same, "/v1/ws?api_key=s3cret");
  completes(ui);
  WsClient header(server_->port(), 0, {{"Authorization", "Bearer s3cret"}});
  completes(header);
}

}  // namespace
}  // namespace pagoda
