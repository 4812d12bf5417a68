// X-Request-Id as vLLM treats it, on the real `pagoda serve`: the header
// names the completion (cmpl-<id>, chatcmpl-<id>), before the body's
// request_id (vLLM's _base_request_id); with --enable-request-id-headers
// every HTTP response carries X-Request-Id: the request's own, else a fresh
// random one (vLLM's XRequestIdMiddleware), streamed responses and errors
// included.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

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

}  // namespace
}  // namespace pagoda::testing_http
