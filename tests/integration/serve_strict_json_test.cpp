// Request bodies that JSON parsers read differently are refused with a 400
// naming the problem, on the real `pagoda serve` (bundled stories260K):
// an object with the same key twice (RFC 8259 §4: names SHOULD be unique;
// which value wins differs between parsers), and a string with a lone UTF-16
// surrogate escape (RFC 8259 §8.2: not a Unicode string).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeStrictJson : public BundledServerSuite<ServeStrictJson> {};

// POSTs the raw body; expects a 400 OpenAI error whose message holds `part`.
void expect_400(uint16_t port, const std::string& path, const std::string& body, const std::string& part) {
  SCOPED_TRACE(path + " " + body);
  HttpClient c(port);
  HttpResponse r = c.post(path, body);
  EXPECT_EQ(r.status, 400) << r.body;
  json e = json::parse(r.body);
  EXPECT_EQ(e["error"]["type"], "BadRequestError") << r.body;
  EXPECT_EQ(e["error"]["code"], 400) << r.body;
  EXPECT_NE(e["error"]["message"].get<std::string>().find(part), std::string::npos) << r.body;
}

TEST_F(ServeStrictJson, DuplicateKeysAre400NamingTheKey) {
  expect_400(port(), "/v1/completions", R"({"prompt": "Once", "max_tokens": 2, "prompt": "upon"})",
             "has the key 'prompt' twice in one JSON object");
  // Nested: a chat message with two contents (found before the bundled
  // model's missing chat template is).
  expect_400(port(), "/v1/chat/completions",
             R"({"messages": [{"role": "user", "content": "a", "content": "b"}], "max_tokens": 2})",
             "has the key 'content' twice");
  expect_400(port(), "/tokenize", R"({"prompt": "a", "add_special_tokens": true, "add_special_tokens": false})",
             "has the key 'add_special_tokens' twice");
}

TEST_F(ServeStrictJson, LoneSurrogatesAre400) {
  // A high surrogate with nothing after it, one followed by a non-surrogate,
  // a low surrogate alone.
  for (const char* body : {R"({"prompt": "a\ud800b", "max_tokens": 2})", R"({"prompt": "\ud800\u0041", "max_tokens": 2})",
                           R"({"prompt": "\udc00", "max_tokens": 2})"})
    expect_400(port(), "/v1/completions", body, "surrogate");
  expect_400(port(), "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "\udfff"}]})", "surrogate");
}

// Controls: a surrogate pair is one character, and the same key in two
// different objects is no duplicate.
TEST_F(ServeStrictJson, PairedSurrogatesAndRepeatedKeysInOtherObjectsAreFine) {
  HttpClient c(port());
  HttpResponse r = c.post("/v1/completions",
                          R"({"prompt": "\ud83d\ude00 Once", "max_tokens": 2, "a": {"x": 1}, "b": {"x": 1, "y": {"x": 2}}})");
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace pagoda::testing_http
