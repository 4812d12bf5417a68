// Guided decoding over HTTP (`pagoda serve` on tiny-random-qwen2-chat,
// random weights, temperature 1): 200 seeded constraints (schemas through
// guided_json, response_format json_schema and structured_outputs.json;
// regexes; choice lists), half streamed and half not, alternating
// /v1/completions and /v1/chat/completions; every output finishes "stop"
// and validates under Python's jsonschema / re
// (tests/support/validate_guided.py). The 1,000-case offline run is
// tests/unit/guided_acceptance_test.cpp. Also: response_format json_object
// gives a JSON object; invalid constraints are 400s naming the field.
// Structural tags: response_format {type: structural_tag, structures,
// triggers}, structured_outputs.structural_tag and the top-level
// structural_tag (JSON text) on both endpoints, streamed and not; the
// invalid ones are 400s naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "engine/guided/guide.h"
#include "engine/guided/structural_tag.h"
#include "tests/integration/serve_reference_util.h"
#include "tests/support/grammar_cases.h"
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

// Sends `body` (streamed or not) and returns the first choice's text and
// finish reason.
std::pair<std::string, std::string> request(int port, const std::string& path, json body, bool chat,
                                            bool stream) {
  std::string text, finish;
  if (stream) {
    body["stream"] = true;
    HttpClient client(port);
    HttpResponse r = client.post(path, body.dump());
    if (r.status != 200) {
      ADD_FAILURE() << path << " answered " << r.status << ": " << r.body;
      return {};
    }
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
    json r = post_json(port, path, body);
    const json& ch = r["choices"][0];
    text = chat ? ch["message"]["content"].get<std::string>() : ch["text"].get<std::string>();
    finish = ch["finish_reason"];
  }
  return {text, finish};
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
    auto [text, finish] = request(port(), path, body, chat, stream);
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

// guided_grammar: 40 bounded grammars (random ones equivalent to a Python
// regex, and a depth-bounded JSON grammar), streamed and not, both
// endpoints; every output finishes "stop", is a sentence of its grammar,
// and passes Python's re.fullmatch / json.loads.
TEST_F(ServeGuided, FortyGrammarsStreamedAndNotAllParse) {
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (validate_guided.py imports it)";
  auto vocab = guided::TokenVocab::of(std::shared_ptr<const Tokenizer>(tok_));
  testing_guided::GrammarRegexGenerator gen(99, /*bounded=*/true);
  std::vector<GuidedCase> cases;
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    GuidedCase c;
    std::string grammar;
    if (i % 4 == 1) {
      grammar = testing_guided::kBoundedJsonGrammar;
      c.kind = "json_value";
      c.spec = "json";
    } else {
      auto [g, re] = gen.next();
      grammar = g;
      c.kind = "regex";
      c.spec = re;
    }
    json body = i % 3 ? json{{"guided_grammar", grammar}}
                      : json{{"structured_outputs", {{"grammar", grammar}}}};
    body["temperature"] = 1.0;
    body["seed"] = i;
    body["max_tokens"] = 300;  // above every sentence's length in bytes (<= 239)
    const bool chat = i % 4 >= 2, stream = i % 2 == 1;
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (chat)
      body["messages"] = json::array({{{"role", "user"}, {"content", "Say " + std::to_string(i)}}});
    else
      body["prompt"] = "Say " + std::to_string(i) + ":";
    auto [text, finish] = request(port(), path, body, chat, stream);
    EXPECT_EQ(finish, "stop") << "case " << i << ": " << text;
    EXPECT_TRUE(guided::compile_guide({guided::GuideKind::kGrammar, grammar}, vocab)->matches(text))
        << "case " << i << ": '" << text << "'\n"
        << grammar;
    cases.push_back(std::move(c));
    texts.push_back(text);
  }
  std::string report;
  const int rc = testing_guided::validate_with_python(
      cases, texts, std::string(PAGODA_BINARY_DIR) + "/guided_serve_grammar_outputs.jsonl",
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
                               {{"prompt", "x"}, {"guided_grammar", "root ::= \"a\" nope"}}, 400);
  EXPECT_EQ(bad_grammar["error"]["param"], "guided_grammar");
  EXPECT_NE(bad_grammar["error"]["message"].get<std::string>().find("rule 'nope' is not defined"),
            std::string::npos)
      << bad_grammar;
  json lark = post_json(port(), "/v1/chat/completions",
                        {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                         {"structured_outputs", {{"grammar", "start: \"a\""}}}},
                        400);
  EXPECT_EQ(lark["error"]["param"], "structured_outputs.grammar");
  EXPECT_NE(lark["error"]["message"].get<std::string>().find("Lark-style"), std::string::npos)
      << lark;
}

// A regex whose automaton would cost gigabytes (nested counted repetition:
// ((a{1,50}){1,50}){1,50} had grown the server to 23 GB and an OOM kill) is
// a 400 naming the field; the server goes on.
TEST_F(ServeGuided, TooComplexRegexIsA400AndTheServerGoesOn) {
  for (const std::string& re :
       {std::string("((a{1,50}){1,50}){1,50}"), std::string("((a{1,30}){1,30}){1,30}")}) {
    json bad = post_json(port(), "/v1/completions",
                         {{"prompt", "x"}, {"max_tokens", 4}, {"guided_regex", re}}, 400);
    EXPECT_EQ(bad["error"]["param"], "guided_regex");
    const std::string msg = bad["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find("invalid guided_regex: pattern too complex"), std::string::npos) << msg;
  }
  json bad_schema = post_json(
      port(), "/v1/chat/completions",
      {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
       {"response_format",
        {{"type", "json_schema"},
         {"json_schema",
          {{"name", "x"},
           {"schema", {{"type", "string"}, {"pattern", "^((a{1,40}){1,40}){1,40}$"}}}}}}}},
      400);
  EXPECT_EQ(bad_schema["error"]["param"], "response_format");
  EXPECT_NE(bad_schema["error"]["message"].get<std::string>().find("too complex"),
            std::string::npos)
      << bad_schema;
  json ok = post_json(port(), "/v1/completions",
                      {{"prompt", "x"}, {"max_tokens", 8}, {"guided_regex", "(ab){1,3}"}});
  const std::string text = ok["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(text == "ab" || text == "abab" || text == "ababab") << text;
}

// response_format json_schema without its schema is a 400 naming
// response_format.json_schema.schema (it had forced the output to "{}").
TEST_F(ServeGuided, JsonSchemaWithoutSchemaIsA400) {
  json bad =
      post_json(port(), "/v1/chat/completions",
                {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                 {"max_tokens", 4},
                 {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
                400);
  EXPECT_EQ(bad["error"]["param"], "response_format.json_schema.schema");
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("is required"), std::string::npos)
      << bad;
}

// A schema no document satisfies (a required property that properties do
// not list, additionalProperties false) is a 400, not a 200 with an invalid
// object.
TEST_F(ServeGuided, RequiredPropertyOutsideClosedPropertiesIsA400) {
  json bad = post_json(
      port(), "/v1/completions",
      {{"prompt", "x"},
       {"max_tokens", 4},
       {"guided_json", json::parse(R"({"type":"object","properties":{"a":{"type":"string"}},)"
                                   R"("required":["b"],"additionalProperties":false})")}},
      400);
  EXPECT_EQ(bad["error"]["param"], "guided_json");
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("no document"), std::string::npos)
      << bad;
}

// A half-anchored schema pattern ("^ab": starts with ab) is accepted and
// followed; a bad one is a 400 giving the offset in the pattern as sent and
// the schema path (it had named an offset in the internal wrapped regex).
TEST_F(ServeGuided, HalfAnchoredSchemaPatterns) {
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", "x"},
                      {"max_tokens", 12},
                      {"temperature", 0},
                      {"guided_json", {{"type", "string"}, {"pattern", "^ab"}}}});
  const std::string text = r["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text.substr(0, 3), std::string("\"ab").substr(0, std::min<size_t>(3, text.size())))
      << text;
  json bad = post_json(port(), "/v1/completions",
                       {{"prompt", "x"},
                        {"guided_json",
                         {{"type", "object"},
                          {"properties", {{"code", {{"type", "string"}, {"pattern", "^ab(c"}}}}}}}},
                       400);
  EXPECT_EQ(bad["error"]["param"], "guided_json");
  const std::string msg = bad["error"]["message"].get<std::string>();
  EXPECT_NE(msg.find("#/properties/code"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid regex at offset 5: missing ')'"), std::string::npos) << msg;
}

// The generated object's keys come in the schema's properties order as the
// request sent it (vLLM's xgrammar / outlines keep it); nlohmann::json had
// sorted the schema ("alpha", "mid", "zeta"). Raw bodies: a json value
// would sort the keys before sending.
TEST_F(ServeGuided, SchemaPropertiesComeInTheOrderSent) {
  const std::string schema =
      R"({"type":"object","properties":{"zeta":{"type":"integer","minimum":0,"maximum":9},)"
      R"("alpha":{"type":"boolean"},"mid":{"enum":["x","y"]}},"required":["zeta","alpha","mid"]})";
  const std::string messages = R"("messages":[{"role":"user","content":"Hi"}])";
  const std::vector<std::pair<std::string, std::string>> requests = {
      {"/v1/completions",
       R"({"prompt":"Hi","temperature":0,"max_tokens":60,"guided_whitespace_pattern":"",)"
       R"("guided_json":)" +
           schema + "}"},
      {"/v1/chat/completions",
       "{" + messages +
           R"(,"temperature":0,"max_tokens":60,"guided_whitespace_pattern":"",)"
           R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" +
           schema + "}}}"},
      {"/v1/chat/completions", "{" + messages +
                                   R"(,"seed":3,"max_tokens":60,"structured_outputs":{"json":)" +
                                   schema + "}}"},
  };
  for (const auto& [path, body] : requests) {
    SCOPED_TRACE(body);
    HttpClient client(port());
    const HttpResponse r = client.post(path, body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json ch = json::parse(r.body)["choices"][0];
    const std::string text = ch.contains("message") ? ch["message"]["content"].get<std::string>()
                                                    : ch["text"].get<std::string>();
    EXPECT_EQ(ch["finish_reason"], "stop") << text;
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"})) << text;
  }
}

// Single-letter triggers, so the random model reaches them often.
json structural_tag_object() {
  return {{"structures",
           {{{"begin", "a="},
             {"schema",
              {{"type", "object"},
               {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
               {"required", {"n"}}}},
             {"end", ";"}},
            {{"begin", "a:"}, {"schema", {{"enum", {"x", "y"}}}}, {"end", ";"}},
            {{"begin", "q<"}, {"schema", {{"type", "boolean"}}}, {"end", ">"}}}},
          {"triggers", {"a", "q"}}};
}

TEST_F(ServeGuided, StructuralTagInEveryFormStreamedAndNot) {
  const json tag = structural_tag_object();
  auto guide =
      guided::compile_guide({guided::GuideKind::kStructuralTag,
                             guided::structural_tag_json(guided::parse_structural_tag(tag))},
                            guided::TokenVocab::of(std::shared_ptr<const Tokenizer>(tok_)));
  json rf = tag;
  rf["type"] = "structural_tag";
  const json forms[] = {{{"response_format", rf}},
                        {{"structured_outputs", {{"structural_tag", tag.dump()}}}},
                        {{"structural_tag", tag.dump()}}};
  // Logit biases on the one-byte tokens "a" and "q" make the random model
  // reach the triggers (its logits are far apart: a bias of 30 tells).
  std::string a_id, q_id;
  for (int32_t id = 0; id < guide->vocab().size(); ++id) {
    if (guide->vocab().bytes(id) == "a") a_id = std::to_string(id);
    if (guide->vocab().bytes(id) == "q") q_id = std::to_string(id);
  }
  int structures = 0;
  for (int i = 0; i < 12; ++i) {
    const json& form = forms[i % 3];
    const bool chat = i % 2 == 0, stream = i % 4 >= 2;
    json body = form;
    body["temperature"] = 1.0;
    body["seed"] = 100 + i;
    body["max_tokens"] = 40;
    if (i % 4 != 3) body["logit_bias"] = {{a_id, 30.0}, {q_id, 30.0}};
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (chat)
      body["messages"] = json::array({{{"role", "user"}, {"content", "Go " + std::to_string(i)}}});
    else
      body["prompt"] = "Go " + std::to_string(i) + ":";
    auto [text, finish] = request(port(), path, body, chat, stream);
    SCOPED_TRACE(body.dump());
    // Free text stays free; what follows a trigger is a structure. (Where
    // tokens cut a character in free text the text shows U+FFFD: free text
    // is any bytes, so it walks all the same.)
    const int32_t st = guide->walk(guide->start(), text);
    EXPECT_GE(st, 0) << "case " << i << ": '" << text << "'";
    if (finish == "stop") {
      EXPECT_TRUE(guide->accepting(st)) << "case " << i << ": '" << text << "'";
    } else {
      EXPECT_EQ(finish, "length") << text;
    }
    // Outside JSON strings (these schemas have none), "a=", "a:" and "q<"
    // occur only where a structure begins.
    for (const char* begin : {"a=", "a:", "q<"})
      for (size_t at = text.find(begin); at != std::string::npos; at = text.find(begin, at + 1))
        ++structures;
  }
  EXPECT_GE(structures, 6) << "few structures were written: the test is (nearly) vacuous";
}

TEST_F(ServeGuided, StructuralTagErrorsNameTheField) {
  const json tag = structural_tag_object();
  auto expect_400 = [&](const json& fields, const std::string& param, const std::string& needle) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
      json body = fields;
      if (std::string(path) == "/v1/completions")
        body["prompt"] = "x";
      else
        body["messages"] = json::array({{{"role", "user"}, {"content", "x"}}});
      json r = post_json(port(), path, body, 400);
      EXPECT_EQ(r["error"]["param"], param) << path << " " << r;
      EXPECT_NE(r["error"]["message"].get<std::string>().find(needle), std::string::npos)
          << path << " " << r << "\n  expected: " << needle;
    }
  };
  auto rf = [&](json t) {
    t["type"] = "structural_tag";
    return json{{"response_format", t}};
  };
  json t = tag;
  t.erase("structures");
  expect_400(rf(t), "response_format", "structures is required");
  t = tag;
  t["structures"] = json::array();
  expect_400(rf(t), "response_format", "structures must be a non-empty list");
  t = tag;
  t["triggers"] = {"a", "q", "<tool>"};
  expect_400(rf(t), "response_format", R"(trigger "<tool>" begins none of the structures)");
  t = tag;
  t["triggers"] = {"a"};
  expect_400(rf(t), "response_format",
             R"(structures[2].begin "q<" starts with none of the triggers)");
  t = tag;
  t["structures"][0]["schema"] = {{"type", "objekt"}};
  expect_400(rf(t), "response_format", "structures[0].schema: ");
  expect_400(json{{"response_format", {{"type", "structural_tag"}, {"format", json::object()}}}},
             "response_format", "not supported");
  // The string forms.
  expect_400(json{{"structured_outputs", {{"structural_tag", "{not json"}}}},
             "structured_outputs.structural_tag", "not valid JSON");
  expect_400(json{{"structured_outputs", {{"structural_tag", t.dump()}}}},
             "structured_outputs.structural_tag", "unknown type 'objekt'");
  t = tag;
  t["triggers"] = {"a", "q", "qq"};
  expect_400(json{{"structural_tag", t.dump()}}, "structural_tag",
             R"(trigger "q" is a prefix of trigger "qq")");
  expect_400(json{{"structural_tag", 5}}, "structural_tag", "structural_tag");
  // One constraint per request.
  expect_400(json{{"structural_tag", tag.dump()}, {"guided_regex", "a+"}}, "structural_tag",
             "only one kind of guided decoding");
}

}  // namespace
}  // namespace pagoda::testing_http
