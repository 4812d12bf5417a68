// X-Request-Id as vLLM treats it, on the real `pagoda serve`: the header
// names the completion (cmpl-<id>, chatcmpl-<id>), before the body's
// request_id (vLLM's _base_request_id); with --enable-request-id-headers
// every HTTP response carries X-Request-Id: the request's own, else a fresh
// random one (vLLM's XRequestIdMiddleware), streamed responses and errors
// included.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/serve_test_util.h"
#include "tests/support/prometheus_text.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;
namespace http = boost::beast::http;

class ServeRequestId : public BundledServerSuite<ServeRequestId> {
 public:
  static std::vector<std::string> server_args() {
    return {std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--chat-template",
            shared_path("chat_templates/llama-2-chat.jinja"), "--enable-request-id-headers"};
  }
};

HttpResponse post_with_id(uint16_t port, const std::string& path, const json& body,
                          const std::string& id) {
  HttpClient c(port);
  std::vector<std::pair<std::string, std::string>> headers;
  if (!id.empty()) headers.emplace_back("X-Request-Id", id);
  c.send(http::verb::post, path, body.dump(), headers);
  return c.read_response();
}

TEST_F(ServeRequestId, TheHeaderNamesTheCompletionAndComesBack) {
  HttpResponse r =
      post_with_id(port(), "/v1/completions",
                   {{"prompt", "Once"}, {"max_tokens", 1}, {"request_id", "body-1"}}, "trace-42");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["id"], "cmpl-trace-42");
  EXPECT_EQ(r.x_request_id, "trace-42");

  HttpResponse chat = post_with_id(
      port(), "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}, {"stream", true}},
      "trace-43");
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.x_request_id, "trace-43");
  EXPECT_EQ(json::parse(sse_payloads(chat.body).at(0))["id"], "chatcmpl-trace-43");

  // Without the header the body's request_id names it; the response header
  // is then a fresh random id.
  HttpResponse body_id =
      post_with_id(port(), "/v1/completions",
                   {{"prompt", "Once"}, {"max_tokens", 1}, {"request_id", "b-2"}}, "");
  EXPECT_EQ(json::parse(body_id.body)["id"], "cmpl-b-2");
  EXPECT_EQ(body_id.x_request_id.size(), 32u) << body_id.x_request_id;
  HttpResponse other = post_with_id(port(), "/v1/completions", {{"prompt", "Once"}}, "");
  EXPECT_NE(other.x_request_id, body_id.x_request_id);

  // Errors and other endpoints carry it too.
  HttpResponse bad = post_with_id(port(), "/v1/completions", {{"prompt", 5}}, "trace-44");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.x_request_id, "trace-44");
  HttpClient c(port());
  EXPECT_EQ(c.get("/health").x_request_id.size(), 32u);
}

// A client may reuse another's request_id (vLLM runs both). One that hangs
// up at once aborts its own request, never the running one that holds the
// id (the engine ids are unique: generation_group.h). Before, the hang-up's
// abort by id could reach the first request and end it with "abort".
TEST_F(ServeRequestId, AClientReusingARunningIdAndHangingUpAbortsOnlyItsOwnRequest) {
  const json victim = {{"prompt", "Once upon a time"},
                       {"max_tokens", 300},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"stream", true},
                       {"request_id", "victim"},
                       {"stream_options", {{"include_usage", true}}}};
  HttpClient a(port());
  a.send(http::verb::post, "/v1/completions", victim.dump());
  HttpResponse a_response;
  std::thread reader([&] { a_response = a.read_response(); });
  // It runs (bounded wait on /metrics; the engine takes ~1 s for its 300 tokens).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    HttpClient m(port());
    if (testing_prom::parse_prometheus_text(m.get("/metrics").body)
            .value("pagoda:num_requests_running") >= 1)
      break;
  }
  for (int i = 0; i < 6; ++i) {
    HttpClient b(port());
    b.send(http::verb::post, "/v1/completions", victim.dump());
    b.close();
  }
  // The same id over the X-Request-Id header, then hang-up.
  for (int i = 0; i < 3; ++i) {
    HttpClient b(port());
    b.send(http::verb::post, "/v1/completions", victim.dump(), {{"X-Request-Id", "victim"}});
    b.close();
  }
  reader.join();
  StreamResult r = parse_stream(a_response);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.usage["completion_tokens"], 300);
  // Two requests with one id at once: both answered in full.
  json body = {{"prompt", "Once"}, {"max_tokens", 8}, {"temperature", 0}, {"request_id", "twin"}};
  HttpResponse x = post_with_id(port(), "/v1/completions", body, "");
  HttpResponse y = post_with_id(port(), "/v1/completions", body, "");
  ASSERT_EQ(x.status, 200) << x.body;
  ASSERT_EQ(y.status, 200) << y.body;
  EXPECT_EQ(json::parse(x.body)["id"], "cmpl-twin");
  EXPECT_EQ(json::parse(x.body)["choices"][0]["text"], json::parse(y.body)["choices"][0]["text"]);
}

}  // namespace
}  // namespace pagoda::testing_http
