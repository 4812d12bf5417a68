// Guided decoding over HTTP (`pagoda serve` on tiny-random-qwen2-chat,
// random weights, temperature 1): 200 seeded constraints (schemas through
// guided_json, response_format json_schema and structured_outputs.json;
// regexes; choice lists), half streamed and half not, alternating
// /v1/completions and /v1/chat/completions; every output finishes "stop"
// and validates under Python's jsonschema / re
// (tests/support/validate_guided.py). The 1,000-case offline run is
// tests/unit/guided_acceptance_test.cpp. Also: response_format json_object
// gives a JSON object; invalid constraints are 400s naming the field.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/guided/guide.h"
#include "tests/integration/serve_reference_util.h"
#include "tests/support/guided_cases.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;
using testing_guided::GuidedCase;

struct Qwen2Chat {
  static constexpr const char* kDir = "tiny-random-qwen2-chat";
  static constexpr const char* kName = "qwen";
};
using ServeGuided = ServeReferenceModel<Qwen2Chat>;

guided::GuideSpec spec_of(const GuidedCase& c) {
  if (c.kind == "regex") return {guided::GuideKind::kRegex, c.spec.get<std::string>()};
  if (c.kind == "choice") return {guided::GuideKind::kChoice, c.spec.dump()};
  return {guided::GuideKind::kJson, c.spec.dump()};
}

TEST_F(ServeGuided, TwoHundredConstraintsStreamedAndNotAllValidate) {
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/install-deps.sh installs it)";
  auto vocab = guided::TokenVocab::of(std::shared_ptr<const Tokenizer>(tok_));
  testing_guided::CaseGenerator gen(7);
  std::vector<GuidedCase> cases;
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    GuidedCase c = gen.next(i);
    const int64_t bound = guided::compile_guide(spec_of(c), vocab)->max_output_bytes();
    ASSERT_GE(bound, 0);
    json body = c.fields;
    body["temperature"] = 1.0;
    body["seed"] = i;
    body["max_tokens"] = testing_guided::max_tokens_for_bound(bound);
    const bool chat = i % 4 >= 2, stream = i % 2 == 1;
    std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (chat) {
      body["messages"] =
          json::array({{{"role", "user"}, {"content", "Answer " + std::to_string(i)}}});
    } else {
      body["prompt"] = "Answer " + std::to_string(i) + ":";
    }
    std::string text, finish;
    if (stream) {
      body["stream"] = true;
      HttpClient client(port());
      HttpResponse r = client.post(path, body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      for (const std::string& e : sse_payloads(r.body)) {
        if (e == "[DONE]") continue;
        json j = json::parse(e);
        if (j["choices"].empty()) continue;
        const json& ch = j["choices"][0];
        if (ch.contains("delta")) {
          if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
            text += ch["delta"]["content"];
        } else {
          text += ch["text"].get<std::string>();
        }
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
          finish = ch["finish_reason"];
      }
    } else {
      json r = post_json(port(), path, body);
      const json& ch = r["choices"][0];
      text = chat ? ch["message"]["content"].get<std::string>() : ch["text"].get<std::string>();
      finish = ch["finish_reason"];
    }
    EXPECT_EQ(finish, "stop") << "case " << i << ": " << text;
    cases.push_back(std::move(c));
    texts.push_back(text);
  }
  std::string report;
  const int rc = testing_guided::validate_with_python(
      cases, texts, std::string(PAGODA_BINARY_DIR) + "/guided_serve_outputs.jsonl",
      std::string(PAGODA_SOURCE_DIR) + "/tests/support/validate_guided.py", &report);
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << report;
}

TEST_F(ServeGuided, JsonObjectAndErrors) {
  // json_object: greedy on a random model writes some object; the output
  // must parse as one whenever it finished ("stop").
  json r = post_json(port(), "/v1/chat/completions",
                     {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                      {"response_format", {{"type", "json_object"}}},
                      {"guided_whitespace_pattern", ""},
                      {"temperature", 0},
                      {"max_tokens", 200}});
  const json& ch = r["choices"][0];
  if (ch["finish_reason"] == "stop") {
    json v = json::parse(ch["message"]["content"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(v.is_object()) << ch["message"]["content"];
  } else {
    EXPECT_EQ(ch["message"]["content"].get<std::string>().front(), '{');
  }
  json bad = post_json(port(), "/v1/completions",
                       {{"prompt", "x"}, {"guided_json", {{"type", "objekt"}}}}, 400);
  EXPECT_EQ(bad["error"]["param"], "guided_json");
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("unknown type 'objekt'"),
            std::string::npos);
  json bad_grammar = post_json(port(), "/v1/completions",
                               {{"prompt", "x"}, {"guided_grammar", "root ::= \"a\""}}, 400);
  EXPECT_EQ(bad_grammar["error"]["param"], "guided_grammar");
}

}  // namespace
}  // namespace pagoda::testing_http
