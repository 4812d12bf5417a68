// tool_choice "required" and a named function over HTTP (`pagoda serve` on
// tiny-random-qwen2-chat, random weights, temperature 1, no
// --enable-auto-tool-choice: vLLM needs none for these): 48 seeded requests,
// named and required, streamed and not. Every one finishes; each returned
// call names one of the tools and its arguments string parses and validates
// against that tool's parameters under Python's jsonschema
// (tests/support/validate_guided.py); the response shapes are vLLM's
// (content "", ids "chatcmpl-tool-...", finish_reason "stop" non-streamed
// and "tool_calls" streamed; streamed deltas: index, id, type and name
// first, then argument fragments). Also: another guided field and an
// unsupported schema keyword are 400s naming them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "tests/integration/serve_reference_util.h"
#include "tests/support/guided_cases.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;
using testing_guided::GuidedCase;

// The tools rendered by Qwen2.5's template make a ~400-token prompt: a
// context of 4096 leaves room for a list of calls.
class ServeToolChoice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer({model_path("tiny-random-qwen2-chat"), "--served-model-name", "qwen",
                                "--dtype", "float32", "--max-model-len", "4096"});
  }
  static void TearDownTestSuite() {
    const int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  inline static PagodaServer* server_ = nullptr;
};

// Bounded schemas (strings with maxLength, enums, integer ranges, an
// optional property, a nested object, an array with maxItems, a $defs
// reference, a tool without parameters) so a random model's output ends.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "book", "parameters": {"type": "object",
    "properties": {
      "who": {"$ref": "#/$defs/Person"},
      "seats": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                "maxItems": 3},
      "vip": {"type": "boolean"}},
    "required": ["who", "seats"],
    "$defs": {"Person": {"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0,
      "maximum": 120}}, "required": ["name"]}}}}},
  {"type": "function", "function": {"name": "now"}}
])");

// The schema a call's arguments must validate against: the tool's
// parameters (a tool without: an object with no properties).
json schema_of(const std::string& name) {
  for (const json& t : kTools)
    if (t["function"]["name"] == name) {
      const json& p = t["function"].value("parameters", json());
      return p.is_null() ? json{{"type", "object"},
                                {"properties", json::object()},
                                {"additionalProperties", false}}
                         : p;
    }
  return nullptr;
}

struct Calls {
  std::string finish;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string content;
};

Calls run(uint16_t port, const json& body, bool stream) {
  Calls out;
  if (!stream) {
    json r = post_json(port, "/v1/chat/completions", body);
    const json& ch = r["choices"][0];
    out.finish = ch["finish_reason"];
    out.content = ch["message"]["content"].is_string() ? ch["message"]["content"].get<std::string>()
                                                       : "<null>";
    for (const json& c : ch["message"]["tool_calls"]) {
      EXPECT_EQ(c["type"], "function");
      EXPECT_EQ(c["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u) << c;
      out.calls.emplace_back(c["function"]["name"], c["function"]["arguments"]);
    }
    return out;
  }
  json b = body;
  b["stream"] = true;
  HttpClient client(port);
  HttpResponse r = client.post("/v1/chat/completions", b.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  for (const std::string& e : sse_payloads(r.body)) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    if (j["choices"].empty()) continue;
    const json& ch = j["choices"][0];
    const json& delta = ch["delta"];
    if (delta.contains("content") && !delta.contains("role")) out.content += "<content>";
    if (delta.contains("tool_calls"))
      for (const json& t : delta["tool_calls"]) {
        const size_t index = t["index"].get<size_t>();
        if (t.contains("id")) {
          // A call's first delta: index, id, type and name.
          EXPECT_EQ(index, out.calls.size()) << t;
          EXPECT_EQ(t["type"], "function");
          EXPECT_EQ(t["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u) << t;
          out.calls.emplace_back(t["function"]["name"], t["function"]["arguments"]);
        } else {
          EXPECT_EQ(index + 1, out.calls.size()) << t;
          EXPECT_FALSE(t["function"].contains("name")) << t;
          if (index < out.calls.size()) out.calls[index].second += t["function"]["arguments"];
        }
      }
    if (ch["finish_reason"].is_string()) out.finish = ch["finish_reason"];
  }
  return out;
}

TEST_F(ServeToolChoice, NamedAndRequiredStreamedAndNotAllValidate) {
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/install-deps.sh installs it)";
  std::vector<GuidedCase> cases;
  std::vector<std::string> texts;
  std::map<std::string, int> seen;
  for (int i = 0; i < 48; ++i) {
    const bool stream = i % 2 == 1;
    const bool required = i % 4 >= 2;
    const std::string named = kTools[(i / 4) % 3]["function"]["name"];
    json body = {
        {"messages",
         json::array({{{"role", "user"}, {"content", fmt::format("Call a tool ({})", i)}}})},
        {"tools", kTools},
        {"temperature", 1.0},
        {"seed", i},
        {"max_tokens", 1500}};
    body["tool_choice"] =
        required ? json("required") : json{{"type", "function"}, {"function", {{"name", named}}}};
    const Calls got = run(port(), body, stream);
    const std::string what = fmt::format("case {} ({}, {})", i, required ? "required" : named,
                                         stream ? "streamed" : "not streamed");
    EXPECT_EQ(got.finish, stream ? "tool_calls" : "stop") << what;
    EXPECT_EQ(got.content, "") << what;  // nothing streamed as content; "" non-streamed
    ASSERT_FALSE(got.calls.empty()) << what;
    if (!required) {
      EXPECT_EQ(got.calls.size(), 1u) << what;
    }
    for (const auto& [name, args] : got.calls) {
      if (!required) {
        EXPECT_EQ(name, named) << what;
      }
      const json schema = schema_of(name);
      ASSERT_FALSE(schema.is_null()) << what << ": unknown tool " << name;
      ++seen[name];
      cases.push_back({"json", schema, json()});
      texts.push_back(args);
    }
  }
  EXPECT_EQ(seen.size(), 3u) << "every tool called at least once";
  std::string report;
  const int rc = testing_guided::validate_with_python(
      cases, texts, std::string(PAGODA_BINARY_DIR) + "/tool_choice_serve_outputs.jsonl",
      std::string(PAGODA_SOURCE_DIR) + "/tests/support/validate_guided.py", &report);
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << report;
}

TEST_F(ServeToolChoice, ConflictsAndUnsupportedSchemasAre400s) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
               {"tools", kTools},
               {"tool_choice", "required"},
               {"guided_json", {{"type", "object"}}}};
  json e = post_json(port(), "/v1/chat/completions", body, 400);
  EXPECT_EQ(e["error"]["param"], "guided_json");
  body.erase("guided_json");
  body["response_format"] = {{"type", "json_object"}};
  e = post_json(port(), "/v1/chat/completions", body, 400);
  EXPECT_EQ(e["error"]["param"], "response_format");
  body.erase("response_format");
  body["tools"] = json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}}}}])");
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "f"}}}};
  e = post_json(port(), "/v1/chat/completions", body, 400);
  EXPECT_EQ(e["error"]["param"], "tools");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'multipleOf' is not supported"),
            std::string::npos)
      << e;
  // The server still serves: a named call right after.
  body["tools"] = kTools;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  body["max_tokens"] = 1500;
  json ok = post_json(port(), "/v1/chat/completions", body);
  EXPECT_EQ(ok["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST_F(ServeToolChoice, RequiredCutShortByMaxTokens) {
  // vLLM: the non-streamed output that is not a whole list is a 400; the
  // streamed one sends what it had, finish_reason "tool_calls" once a call
  // began ("length" before).
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
               {"tools", kTools},
               {"tool_choice", "required"},
               {"temperature", 0},
               {"max_tokens", 3}};
  json e = post_json(port(), "/v1/chat/completions", body, 400);
  EXPECT_EQ(e["error"]["param"], "tool_choice");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("not complete JSON"), std::string::npos)
      << e;
  const Calls got = run(port(), body, true);
  EXPECT_EQ(got.finish, got.calls.empty() ? "length" : "tool_calls");
}

}  // namespace
}  // namespace pagoda::testing_http
