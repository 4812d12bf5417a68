// The declared request models (server/request_model.h): unknown fields
// listed, fields not supported yet refused with a 400 naming them, and the
// fields vLLM implements cheaply filled into SamplingParams / ParsedRequest.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "engine/guided/guide.h"
#include "server/api_docs.h"
#include "server/bad_words.h"
#include "server/openai_request.h"
#include "server/request_model.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_protocol::make_test_model;

ParsedRequest ok(const ParseResult& r) {
  if (auto* e = std::get_if<OpenAIError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << e->body();
    return {};
  }
  return std::get<ParsedRequest>(r);
}

OpenAIError err(const ParseResult& r) {
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r)) << "expected an error";
  if (!std::holds_alternative<OpenAIError>(r)) return {};
  return std::get<OpenAIError>(r);
}

ParseResult completion(json body, const ServingModel& m = make_test_model()) {
  if (!body.contains("prompt")) body["prompt"] = "x";
  return parse_completion_request(body.dump(), m);
}

ParseResult chat(json body, const ServingModel& m = make_test_model()) {
  if (!body.contains("messages"))
    body["messages"] = json::array({{{"role", "user"}, {"content", "q"}}});
  return parse_chat_request(body.dump(), m);
}

ParseResult generate(json body, const ServingModel& m = make_test_model()) {
  if (!body.contains("prompt")) body["prompt"] = "x";
  return parse_generate_request(body.dump(), m);
}

// A 400 with param `field` and "'field' is not supported yet", from all
// three endpoints.
void expect_not_supported(const std::string& field, const json& value) {
  SCOPED_TRACE(field + " = " + value.dump());
  for (const ParseResult& r :
       {completion({{field, value}}), chat({{field, value}}), generate({{field, value}})}) {
    OpenAIError e = err(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "BadRequestError");
    EXPECT_EQ(e.param, field);
    EXPECT_NE(e.message.find("'" + field + "' is not supported yet"), std::string::npos)
        << e.message;
  }
}

// ---- unknown fields ----

TEST(RequestFields, MisspelledFieldIsListedAndTheDefaultStays) {
  ParsedRequest r = ok(completion({{"max_token", 5}, {"temprature", 0}}));
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"max_token", "temprature"}));
  EXPECT_EQ(r.sampling.max_tokens.value(), 16);  // max_token did nothing
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(ok(chat({{"max_token", 5}})).ignored_fields, (std::vector<std::string>{"max_token"}));
  EXPECT_EQ(ok(generate({{"max_token", 5}})).ignored_fields,
            (std::vector<std::string>{"max_token"}));
}

// vLLM's StreamOptions and ResponseFormat are OpenAIBaseModels too: their
// extra keys are logged like top-level ones (listed as "<field>.<key>").
TEST(RequestFields, UnknownKeysInsideNestedModelsAreListed) {
  ParsedRequest r =
      ok(completion({{"stream", true},
                     {"stream_options", {{"include_usage", true}, {"include_usgae", true}}},
                     {"response_format", {{"type", "text"}, {"strict", true}}}}));
  EXPECT_EQ(r.ignored_fields,
            (std::vector<std::string>{"stream_options.include_usgae", "response_format.strict"}));
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(
      ok(chat({{"stream", true}, {"stream_options", {{"x", 1}}}, {"typo", 1}})).ignored_fields,
      (std::vector<std::string>{"typo", "stream_options.x"}));
  // Declared keys only: nothing listed; free-form objects are not checked.
  EXPECT_TRUE(
      ok(chat({{"stream", true},
               {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", false}}},
               {"chat_template_kwargs", {{"anything", 1}}}}))
          .ignored_fields.empty());
}

// Integers beyond 64 bits are out of range, not "not an integer".
TEST(RequestFields, IntegerBeyondSixtyFourBitsIsOutOfRange) {
  for (const char* literal :
       {"18446744073709551616", "9223372036854775808", "-18446744073709551616"}) {
    SCOPED_TRACE(literal);
    OpenAIError e = err(parse_completion_request(
        std::string(R"({"prompt": "x", "max_tokens": )") + literal + "}", make_test_model()));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_NE(e.message.find("'max_tokens' is out of range"), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find("must be an integer"), std::string::npos) << e.message;
  }
  // A fraction is still a type error.
  EXPECT_NE(err(completion({{"max_tokens", 1.5}})).message.find("must be an integer"),
            std::string::npos);
}

TEST(RequestFields, DeclaredFieldsAreNotListed) {
  // user: accepted and ignored as vLLM does, but declared; null values too.
  EXPECT_TRUE(ok(completion({{"user", "u1"}, {"max_tokens", 3}, {"seed", nullptr}}))
                  .ignored_fields.empty());
  EXPECT_TRUE(
      ok(chat({{"user", "u1"}, {"max_completion_tokens", 3}, {"parallel_tool_calls", true}}))
          .ignored_fields.empty());
}

TEST(RequestFields, ReadingAnUndeclaredFieldIsAProgrammingError) {
  json obj = {{"prompt", "x"}};
  request_model::RequestFields f(obj, request_model::completion_model());
  EXPECT_THROW(f.boolean("not_a_field"), std::logic_error);
  EXPECT_THROW(f.integer("temperature"), std::logic_error);  // declared as a number
  EXPECT_EQ(f.integer("max_tokens").value(), 16);            // the table's default
}

TEST(RequestFields, EveryModelDeclaresEachFieldOnce) {
  for (const auto* m : {&request_model::completion_model(), &request_model::chat_model(),
                        &request_model::generate_model()}) {
    std::map<std::string_view, int> seen;
    for (const auto& f : m->fields) ++seen[f.name];
    for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << m->endpoint << " " << name;
  }
}

// /openapi.json documents what the request models declare: every field it
// lists is declared, and every field the conversion reads is listed.
TEST(RequestFields, OpenApiDocumentsTheDeclaredFields) {
  const json spec = json::parse(openapi_json());
  const std::pair<const char*, const request_model::RequestModel*> endpoints[] = {
      {"/v1/completions", &request_model::completion_model()},
      {"/v1/chat/completions", &request_model::chat_model()},
      {"/generate", &request_model::generate_model()}};
  for (const auto& [path, model] : endpoints) {
    SCOPED_TRACE(path);
    const json& props = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
                            ["schema"]["properties"];
    for (const auto& [name, _] : props.items()) {
      EXPECT_NE(model->find(name), nullptr) << name << " is not declared";
    }
    for (const auto& f : model->fields) {
      if (f.status == request_model::Status::kConverted) {
        EXPECT_TRUE(props.contains(std::string(f.name))) << f.name << " is not documented";
      }
    }
  }
}

// ---- not supported yet: 400 when set to anything but the default ----

TEST(RequestFieldsNotSupported, GuidedDecodingBackend) {
  expect_not_supported("guided_decoding_backend", "xgrammar");
}

// ---- guided decoding (server/guided_fields.h) ----

TEST(RequestFieldsGuided, ConvertedOnEveryEndpoint) {
  const char* kTag =
      R"({"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}],
          "triggers": ["<a"]})";
  const json bodies[] = {
      {{"guided_regex", "[a-z]{1,3}"}},
      {{"guided_choice", {"yes", "no"}}},
      {{"guided_json", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}},
      {{"guided_json", R"({"type": "boolean"})"}},
      {{"structured_outputs", {{"regex", "x+"}}}},
      {{"guided_grammar", "root ::= \"a\" b*\nb ::= [0-9]"}},
      {{"structured_outputs", {{"grammar", "root ::= (\"x\" | \"y\")+"}}}},
      {{"structured_outputs", {{"json_object", true}, {"disable_any_whitespace", true}}}},
      {{"structural_tag", kTag}},
      {{"structured_outputs", {{"structural_tag", kTag}}}}};
  for (const json& b : bodies) {
    SCOPED_TRACE(b.dump());
    for (const ParseResult& r : {completion(b), chat(b), generate(b)}) {
      const ParsedRequest p = ok(r);
      ASSERT_TRUE(p.sampling.guide);
      ASSERT_TRUE(p.sampling.guided_spec);
    }
  }
  const ParsedRequest c = ok(completion({{"guided_choice", {"yes", "no"}}}));
  EXPECT_TRUE(c.sampling.guide->matches("yes"));
  EXPECT_FALSE(c.sampling.guide->matches("yesno"));
  const ParsedRequest g = ok(chat({{"guided_grammar", "root ::= \"a\" b*\nb ::= [0-9]"}}));
  EXPECT_TRUE(g.sampling.guide->matches("a"));
  EXPECT_TRUE(g.sampling.guide->matches("a123"));
  EXPECT_FALSE(g.sampling.guide->matches("a1b"));
  EXPECT_FALSE(g.sampling.guide->matches(""));
  const ParsedRequest rf = ok(chat(
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", {{"type", "integer"}}}}}}}}));
  EXPECT_TRUE(rf.sampling.guide->matches("-12"));
  EXPECT_FALSE(rf.sampling.guide->matches("1.5"));
  const ParsedRequest jo = ok(completion({{"response_format", {{"type", "json_object"}}}}));
  EXPECT_TRUE(jo.sampling.guide->matches("{\"a\": [1, 2]}"));
  EXPECT_FALSE(ok(completion({{"response_format", {{"type", "text"}}}})).sampling.guide);
  // A structural tag: free text, and after the trigger "<a" the begin "<a>",
  // an integer, "</a>"; response_format's form and the JSON text agree.
  const ParsedRequest st = ok(chat(
      {{"response_format",
        {{"type", "structural_tag"},
         {"structures", {{{"begin", "<a>"}, {"schema", {{"type", "integer"}}}, {"end", "</a>"}}}},
         {"triggers", {"<a"}}}}}));
  EXPECT_EQ(st.sampling.guided_spec->kind, guided::GuideKind::kStructuralTag);
  EXPECT_TRUE(st.sampling.guide->matches("text <a>12</a> more"));
  EXPECT_FALSE(st.sampling.guide->matches("text <a>x</a>"));
  EXPECT_FALSE(st.sampling.guide->matches("text <a>12"));
  EXPECT_TRUE(ok(completion({{"structural_tag", kTag}})).sampling.guide->matches("<a>-1</a>"));
  EXPECT_FALSE(ok(completion(json::object())).sampling.guide);
}

// guided_whitespace_pattern "" (and structured_outputs' whitespace_pattern
// "") allows no whitespace between JSON tokens, as outlines reads it, the
// same as disable_any_whitespace; without a pattern the default "[ ]?"
// applies. "" had been taken for the default.
TEST(RequestFieldsGuided, EmptyWhitespacePatternAllowsNone) {
  const json schema = {
      {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  const json tight_bodies[] = {
      {{"guided_json", schema}, {"guided_whitespace_pattern", ""}},
      {{"structured_outputs", {{"json", schema}, {"whitespace_pattern", ""}}}},
      {{"structured_outputs", {{"json", schema}, {"disable_any_whitespace", true}}}},
      {{"structured_outputs",
        {{"json", schema}, {"whitespace_pattern", ""}, {"disable_any_whitespace", true}}}}};
  for (const json& b : tight_bodies) {
    SCOPED_TRACE(b.dump());
    const ParsedRequest p = ok(completion(b));
    ASSERT_TRUE(p.sampling.guide);
    EXPECT_TRUE(p.sampling.guide->matches(R"({"a":1})"));
    EXPECT_FALSE(p.sampling.guide->matches(R"({"a": 1})"));
    EXPECT_FALSE(p.sampling.guide->matches(R"({ "a":1})"));
  }
  const ParsedRequest jo =
      ok(chat({{"response_format", {{"type", "json_object"}}}, {"guided_whitespace_pattern", ""}}));
  EXPECT_TRUE(jo.sampling.guide->matches(R"({"a":[1,2]})"));
  EXPECT_FALSE(jo.sampling.guide->matches(R"({"a": [1, 2]})"));
  const ParsedRequest dflt = ok(completion({{"guided_json", schema}}));
  EXPECT_TRUE(dflt.sampling.guide->matches(R"({"a": 1})"));
  EXPECT_TRUE(dflt.sampling.guide->matches(R"({"a":1})"));
}

// A schema's properties are generated in the order the request sent them
// (vLLM's xgrammar / outlines keep the schema's order), wherever the schema
// is: the body, parsed as nlohmann::json, had them sorted, so {"zeta",
// "alpha", "mid"} came out as alpha, mid, zeta. The bodies are raw text:
// a json value would sort them before they are sent.
TEST(RequestFieldsGuided, SchemaPropertiesKeepTheOrderSent) {
  const ServingModel m = make_test_model();
  const std::string schema =
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"boolean"},)"
      R"("mid":{"type":"object","properties":{"y":{"type":"integer"},"x":{"type":"integer"}},)"
      R"("required":["y","x"]}},"required":["zeta","alpha","mid"]})";
  const std::string in_order = R"({"zeta":1,"alpha":true,"mid":{"y":2,"x":3}})";
  const std::string sorted = R"({"alpha":true,"mid":{"x":3,"y":2},"zeta":1})";
  const std::string chat_messages = R"("messages":[{"role":"user","content":"q"}])";
  const std::vector<std::pair<std::string, ParseResult>> cases = {
      {"completions guided_json",
       parse_completion_request(R"({"prompt":"x","guided_json":)" + schema + "}", m)},
      {"chat guided_json",
       parse_chat_request("{" + chat_messages + R"(,"guided_json":)" + schema + "}", m)},
      {"generate guided_json",
       parse_generate_request(R"({"prompt":"x","guided_json":)" + schema + "}", m)},
      {"structured_outputs.json",
       parse_completion_request(R"({"prompt":"x","structured_outputs":{"json":)" + schema + "}}",
                                m)},
      {"response_format json_schema",
       parse_chat_request("{" + chat_messages +
                              R"(,"response_format":{"type":"json_schema","json_schema":)"
                              R"({"name":"n","schema":)" +
                              schema + "}}}",
                          m)},
      {"guided_json as text",
       parse_completion_request(R"({"prompt":"x","guided_json":)" + json(schema).dump() + "}", m)},
  };
  for (const auto& [what, r] : cases) {
    SCOPED_TRACE(what);
    const ParsedRequest p = ok(r);
    ASSERT_TRUE(p.sampling.guide);
    EXPECT_TRUE(p.sampling.guide->matches(in_order));
    EXPECT_FALSE(p.sampling.guide->matches(sorted));
  }
}

TEST(RequestFieldsGuided, InvalidSpecsAre400sNamingTheProblem) {
  struct Case {
    json body;
    std::string param, message;
  } cases[] = {
      {{{"guided_regex", "(ab"}}, "guided_regex", "missing ')'"},
      {{{"guided_regex", 5}}, "guided_regex", "must be a string"},
      {{{"guided_choice", json::array()}}, "guided_choice", "non-empty list"},
      {{{"guided_choice", {"a", 1}}}, "guided_choice", "list of strings"},
      {{{"guided_json", {{"type", "strin"}}}}, "guided_json", "unknown type 'strin'"},
      {{{"guided_json", "{bad"}}, "guided_json", "not valid JSON"},
      {{{"guided_json", {{"type", "string"}, {"format", "email"}}}},
       "guided_json",
       "format 'email'"},
      {{{"guided_regex", "a"}, {"guided_choice", {"a"}}}, "guided_choice", "only one kind"},
      {{{"guided_grammar", "root ::= foo"}}, "guided_grammar", "rule 'foo' is not defined"},
      {{{"guided_grammar", "rot ::= \"a\""}}, "guided_grammar", "no 'root' rule"},
      {{{"guided_grammar", "root ::= \"a"}}, "guided_grammar", "line 1, column 10: unterminated"},
      {{{"guided_grammar", "root ::= root \"a\" | \"b\""}}, "guided_grammar", "left-recursive"},
      {{{"structured_outputs", {{"grammar", "start: \"a\""}}}},
       "structured_outputs.grammar",
       "Lark-style grammars"},
      {{{"structured_outputs", {{"structural_tag", "{}"}}}},
       "structured_outputs.structural_tag",
       "structures is required"},
      {{{"structural_tag",
         R"({"structures": [{"begin": "<a>", "schema": {"type": "intger"}, "end": "</a>"}],
             "triggers": ["<a"]})"}},
       "structural_tag",
       "structures[0].schema: "},
      {{{"response_format",
         {{"type", "structural_tag"},
          {"structures", {{{"begin", "<a>"}, {"end", "</a>"}}}},
          {"triggers", {"<b"}}}}},
       "response_format",
       "starts with none of the triggers"},
      {{{"structured_outputs", {{"regexp", "a"}}}}, "structured_outputs", "no field 'regexp'"},
      {{{"guided_json", {{"type", "object"}}}, {"guided_whitespace_pattern", "(  "}},
       "guided_json",
       "guided_whitespace_pattern"},
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"schema", {{"type", "integer"}, {"minimum", 3}, {"maximum", 1}}}}}}}},
       "response_format",
       "no document"},
      {{{"response_format", {{"type", "json_schema"}}}},
       "response_format",
       "json_schema is required"},
      // No schema: vLLM has no constraint to copy (older versions dropped
      // it silently, V1 fails the request), so a 400 naming the field.
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.json_schema.schema",
       "response_format.json_schema.schema is required"},
      {{{"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", nullptr}}}}}},
       "response_format.json_schema.schema",
       "is required"},
      // Past the compile limits (regex_dfa.h): refused before the memory
      // or time is spent, wherever the regex comes from.
      {{{"guided_regex", "((a{1,50}){1,50}){1,50}"}}, "guided_regex", "too complex"},
      {{{"guided_regex", "((a{1,1000}){1,1000}){1,1000}"}}, "guided_regex", "automaton states"},
      {{{"guided_json", {{"type", "string"}, {"pattern", "^((a{1,30}){1,30}){1,30}$"}}}},
       "guided_json",
       "too complex"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    const OpenAIError e = err(completion(c.body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.message), std::string::npos) << e.message;
  }
  // Beam search cannot take a constraint.
  const OpenAIError beam = err(completion(
      {{"guided_regex", "a+"}, {"use_beam_search", true}, {"temperature", 0}, {"n", 2}}));
  EXPECT_NE(beam.message.find("guided decoding is not supported with use_beam_search"),
            std::string::npos)
      << beam.message;
}

// ---- beam search (use_beam_search, length_penalty, early_stopping) ----

TEST(RequestFieldsBeamSearch, ConvertedOnEveryEndpoint) {
  const json beam = {
      {"use_beam_search", true}, {"temperature", 0},         {"n", 2}, {"best_of", 3},
      {"length_penalty", 0.5},   {"early_stopping", "never"}};
  for (const ParseResult& r : {completion(beam), chat(beam), generate(beam)}) {
    const ParsedRequest p = ok(r);
    ASSERT_TRUE(p.beam_search.has_value());
    EXPECT_EQ(p.beam_search->beam_width, 3);
    EXPECT_FLOAT_EQ(p.beam_search->length_penalty, 0.5f);
    EXPECT_EQ(p.beam_search->early_stopping, EarlyStopping::kNever);
    EXPECT_EQ(p.sampling.n, 2);
  }
  const ParsedRequest plain = ok(completion({{"use_beam_search", false}, {"length_penalty", 1}}));
  EXPECT_FALSE(plain.beam_search.has_value());
  EXPECT_TRUE(plain.ignored_fields.empty());
  EXPECT_EQ(
      ok(completion({{"use_beam_search", true}, {"temperature", 0}, {"early_stopping", true}}))
          .beam_search->early_stopping,
      EarlyStopping::kTrue);
}

TEST(RequestFieldsBeamSearch, VllmsChecks) {
  const auto expect_400 = [](const ParseResult& r, const std::string& param,
                             const std::string& words) {
    OpenAIError e = err(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, param);
    EXPECT_NE(e.message.find(words), std::string::npos) << e.message;
  };
  expect_400(completion({{"length_penalty", 2.0}}), "length_penalty",
             "length_penalty is not effective and must be the default value of 1.0 when not using "
             "beam search");
  expect_400(chat({{"early_stopping", true}}), "early_stopping",
             "early_stopping is not effective and must be False when not using beam search");
  expect_400(generate({{"early_stopping", "never"}}), "early_stopping", "not effective");
  expect_400(completion({{"use_beam_search", true}}), "temperature",
             "temperature must be 0 when using beam search");
  expect_400(completion({{"use_beam_search", true}, {"temperature", 0}, {"top_k", 5}}), "top_k",
             "top_k must be -1 when using beam search");
  expect_400(
      completion({{"use_beam_search", true}, {"temperature", 0}, {"early_stopping", "soon"}}),
      "early_stopping", "early_stopping must be true, false or \"never\"");
  expect_400(
      chat(
          {{"use_beam_search", true}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}}),
      "top_logprobs", "not supported with use_beam_search yet");
  expect_400(completion({{"use_beam_search", true}, {"temperature", 0}, {"min_tokens", 2}}),
             "min_tokens", "not supported with use_beam_search yet");
}

TEST(RequestFieldsNotSupported, WrongTypeIsATypeErrorFirst) {
  OpenAIError e = err(completion({{"use_beam_search", "yes"}}));
  EXPECT_EQ(e.param, "use_beam_search");
  EXPECT_NE(e.message.find("must be a boolean"), std::string::npos) << e.message;
}

// ---- truncate_prompt_tokens ----

TEST(RequestFieldsTruncate, KeepsTheLastTokensAndTheBos) {
  // Text with add_special_tokens: BOS kept, k in all (HF's left truncation).
  EXPECT_EQ(ok(completion({{"prompt", "abcdef"}, {"truncate_prompt_tokens", 3}})).prompt_token_ids,
            (std::vector<int32_t>{1, 'e' + 3, 'f' + 3}));
  EXPECT_EQ(
      ok(completion(
             {{"prompt", "abcdef"}, {"add_special_tokens", false}, {"truncate_prompt_tokens", 2}}))
          .prompt_token_ids,
      (std::vector<int32_t>{'e' + 3, 'f' + 3}));
  // Ids as sent: the last k; the echoed text is theirs.
  ParsedRequest ids =
      ok(completion({{"prompt", {5 + 3, 6 + 3, 'x' + 3, 'y' + 3}}, {"truncate_prompt_tokens", 2}}));
  EXPECT_EQ(ids.prompt_token_ids, (std::vector<int32_t>{'x' + 3, 'y' + 3}));
  EXPECT_EQ(ids.prompts[0].text, "xy");
  // Shorter prompts are left alone; -1 is max_model_len.
  EXPECT_EQ(
      ok(completion({{"prompt", "ab"}, {"truncate_prompt_tokens", 10}})).prompt_token_ids.size(),
      3u);
  EXPECT_EQ(
      ok(completion({{"prompt", "ab"}, {"truncate_prompt_tokens", -1}})).prompt_token_ids.size(),
      3u);
  // Chat: the rendered prompt's last k; max_tokens from the truncated length.
  ParsedRequest c = ok(chat({{"truncate_prompt_tokens", 4}}));
  EXPECT_EQ(c.prompt_token_ids.size(), 4u);
  EXPECT_EQ(c.sampling.max_tokens.value(), 64 - 4);
  EXPECT_EQ(ok(generate({{"prompt", "abcdef"}, {"truncate_prompt_tokens", 2}})).prompt_token_ids,
            (std::vector<int32_t>{1, 'f' + 3}));
  // No room for text: HF keeps the special tokens ([BOS] for k = 1).
  EXPECT_EQ(ok(completion({{"prompt", "abcdef"}, {"truncate_prompt_tokens", 1}})).prompt_token_ids,
            (std::vector<int32_t>{1}));
}

TEST(RequestFieldsTruncate, ValidatedAsVllm) {
  for (int k : {0, -2}) {
    OpenAIError e = err(completion({{"truncate_prompt_tokens", k}}));
    EXPECT_EQ(e.param, "truncate_prompt_tokens");
    EXPECT_NE(e.message.find("must be an integer >= 1 or -1, got " + std::to_string(k)),
              std::string::npos)
        << e.message;
  }
  OpenAIError big = err(chat({{"truncate_prompt_tokens", 65}}));
  EXPECT_EQ(big.param, "truncate_prompt_tokens");
  EXPECT_NE(big.message.find("truncate_prompt_tokens (65) cannot be greater than max_length (64)"),
            std::string::npos)
      << big.message;
}

// ---- chat: continue_final_message, chat_template, chat_template_kwargs ----

// The test model's renderer, but closing each turn with "</t>" as real
// templates write an end-of-turn token.
ServingModel turn_closing_model() {
  ServingModel m = make_test_model();
  m.chat_renderer = [](const nlohmann::ordered_json& messages, const ChatRenderOptions& o) {
    std::string out = "<s>";
    for (const auto& msg : messages) {
      out += '[';
      out += msg["role"].get<std::string>();
      out += ']';
      out += msg["content"].get<std::string>();
      out += "</t>";
    }
    if (o.add_generation_prompt) out += "[assistant]";
    return out;
  };
  return m;
}

TEST(RequestFieldsChat, ContinueFinalMessageEndsInsideIt) {
  const json msgs = json::array(
      {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "Hel"}}});
  ParsedRequest r = ok(
      chat({{"messages", msgs}, {"add_generation_prompt", false}, {"continue_final_message", true}},
           turn_closing_model()));
  EXPECT_EQ(r.prompts[0].text, "<s>[user]q</t>[assistant]Hel");
  // Without it the turn is closed.
  EXPECT_EQ(ok(chat({{"messages", msgs}, {"add_generation_prompt", false}}, turn_closing_model()))
                .prompts[0]
                .text,
            "<s>[user]q</t>[assistant]Hel</t>");
  // Trailing whitespace the template kept stays (transformers' rule).
  const json spaced = json::array(
      {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "Hel "}}});
  EXPECT_EQ(ok(chat({{"messages", spaced},
                     {"add_generation_prompt", false},
                     {"continue_final_message", true}},
                    turn_closing_model()))
                .prompts[0]
                .text,
            "<s>[user]q</t>[assistant]Hel ");
}

TEST(RequestFieldsChat, ContinueFinalMessageWithGenerationPromptIs400) {
  // add_generation_prompt defaults to true, as in vLLM.
  for (const json& body :
       {json{{"continue_final_message", true}},
        json{{"continue_final_message", true}, {"add_generation_prompt", true}}}) {
    OpenAIError e = err(chat(body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "continue_final_message");
    EXPECT_NE(e.message.find(
                  "Cannot set both `continue_final_message` and `add_generation_prompt` to True."),
              std::string::npos)
        << e.message;
  }
}

// A server that trusts request templates (--trust-request-chat-template).
ServingModel trusting_model() {
  ServingModel m = make_test_model();
  m.trust_request_chat_template = true;
  return m;
}

TEST(RequestFieldsChat, RequestTemplateAndKwargsReachTheRenderer) {
  ServingModel roomy = trusting_model();
  roomy.max_model_len = 256;
  ParsedRequest r = ok(chat({{"chat_template", "T"},
                             {"chat_template_kwargs", {{"enable_thinking", false}}},
                             {"documents", json::array({{{"title", "a"}, {"text", "b"}}})}},
                            roomy));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(
      r.prompts[0].text,
      R"(<s><tmpl:T>[user]q{documents=[{"text":"b","title":"a"}]}{enable_thinking=false}[assistant])");
  // A server without a template serves a request that brings its own.
  ServingModel no_default = trusting_model();
  no_default.has_chat_template = false;
  EXPECT_EQ(ok(chat({{"chat_template", "T"}}, no_default)).prompts[0].text,
            "<s><tmpl:T>[user]q[assistant]");
  OpenAIError e = err(chat({}, no_default));
  EXPECT_NE(e.message.find("no chat template"), std::string::npos) << e.message;
  EXPECT_EQ(err(chat({{"chat_template_kwargs", "x"}})).param, "chat_template_kwargs");
  OpenAIError shadowed = err(chat({{"chat_template_kwargs", {{"messages", json::array()}}}}));
  EXPECT_EQ(shadowed.param, "chat_template_kwargs");
  EXPECT_NE(shadowed.message.find("cannot set 'messages'"), std::string::npos) << shadowed.message;
  EXPECT_EQ(err(chat({{"chat_template", 5}})).param, "chat_template");
}

// vLLM's _validate_chat_template (serving_engine.py): without
// --trust-request-chat-template, a request bringing its own template (as
// chat_template, or chat_template_kwargs.chat_template; any value but null)
// is refused with vLLM's 400; trusted, chat_template_kwargs.chat_template is
// the template (ChatParams.get_apply_chat_template_kwargs: the request's
// chat_template wins, "auto" counting as unset) and no template variable.
TEST(RequestFieldsChat, RequestTemplateNeedsTrust) {
  const std::string refused =
      "Chat template is passed with request, but --trust-request-chat-template is not set. "
      "Refused request with untrusted chat template.";
  for (const json& body :
       {json{{"chat_template", "T"}}, json{{"chat_template", "auto"}}, json{{"chat_template", ""}},
        json{{"chat_template_kwargs", {{"chat_template", "T"}}}},
        json{{"chat_template_kwargs", {{"chat_template", "T"}, {"x", 1}}}}}) {
    SCOPED_TRACE(body.dump());
    const OpenAIError e = err(chat(body));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "BadRequestError");
    EXPECT_EQ(e.message, refused);
    EXPECT_EQ(e.param, "");
  }
  // Null is no template (vLLM checks `is not None`).
  EXPECT_EQ(ok(chat({{"chat_template", nullptr}})).prompts[0].text, "<s>[user]q[assistant]");
  EXPECT_EQ(ok(chat({{"chat_template_kwargs", {{"chat_template", nullptr}}}})).prompts[0].text,
            "<s>[user]q[assistant]");

  const ServingModel trusted = trusting_model();
  EXPECT_EQ(ok(chat({{"chat_template_kwargs", {{"chat_template", "K"}, {"x", 1}}}}, trusted))
                .prompts[0]
                .text,
            "<s><tmpl:K>[user]q{x=1}[assistant]");
  EXPECT_EQ(ok(chat({{"chat_template", "T"}, {"chat_template_kwargs", {{"chat_template", "K"}}}},
                    trusted))
                .prompts[0]
                .text,
            "<s><tmpl:T>[user]q[assistant]");
  EXPECT_EQ(ok(chat({{"chat_template", "auto"}, {"chat_template_kwargs", {{"chat_template", "K"}}}},
                    trusted))
                .prompts[0]
                .text,
            "<s><tmpl:K>[user]q[assistant]");
  EXPECT_EQ(ok(chat({{"chat_template", "auto"}}, trusted)).prompts[0].text,
            "<s>[user]q[assistant]");
  EXPECT_EQ(err(chat({{"chat_template_kwargs", {{"chat_template", 5}}}}, trusted)).param,
            "chat_template_kwargs");
}

// ---- request_id, priority ----

TEST(RequestFields, RequestIdNamesTheResponse) {
  EXPECT_EQ(ok(completion({{"request_id", "abc"}})).request_id, "cmpl-abc");
  EXPECT_EQ(ok(chat({{"request_id", "abc"}})).request_id, "chatcmpl-abc");
  EXPECT_EQ(ok(chat({})).request_id.size(), 9u + 32u);
  EXPECT_EQ(err(completion({{"request_id", 5}})).param, "request_id");
}

TEST(RequestFields, NonZeroPriorityIs400AsVllmFcfs) {
  ok(completion({{"priority", 0}}));
  for (const ParseResult& r : {completion({{"priority", 1}}), chat({{"priority", -3}})}) {
    OpenAIError e = err(r);
    EXPECT_EQ(e.param, "priority");
    EXPECT_NE(e.message.find("but Priority scheduling is not enabled."), std::string::npos)
        << e.message;
  }
}

// ---- sampling: spaces_between_special_tokens, allowed_token_ids, bad_words, prompt_logprobs ----

TEST(RequestFieldsSampling, SpacesBetweenSpecialTokens) {
  EXPECT_TRUE(ok(completion({})).sampling.spaces_between_special_tokens);
  EXPECT_FALSE(
      ok(chat({{"spaces_between_special_tokens", false}})).sampling.spaces_between_special_tokens);
}

TEST(RequestFieldsSampling, AllowedTokenIds) {
  EXPECT_EQ(ok(completion({{"allowed_token_ids", {5, 258}}})).sampling.allowed_token_ids,
            (std::vector<int32_t>{5, 258}));
  EXPECT_TRUE(ok(chat({})).sampling.allowed_token_ids.empty());
  const std::pair<json, const char*> bad[] = {{json::array(), "is not None and empty!"},
                                              {{5, 259}, "out-of-vocab token id"},
                                              {{-1}, "out-of-vocab token id"},
                                              {{"5"}, "list of integers"},
                                              {5, "must be a list of token ids"}};
  for (const auto& [value, message] : bad) {
    OpenAIError e = err(completion({{"allowed_token_ids", value}}));
    EXPECT_EQ(e.param, "allowed_token_ids");
    EXPECT_NE(e.message.find(message), std::string::npos) << e.message;
  }
}

// Whole-string vocabulary: "hello" 10, " hello" 11, "a b" 12 13 14, " a b"
// 15 13 14 (same length, new first id), "x y" 20 21, " x y" 22 20 21.
class WordTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    static const std::map<std::string, std::vector<int32_t>, std::less<>> vocab = {
        {"hello", {10}},   {" hello", {11}},       {"a b", {12, 13, 14}}, {" a b", {15, 13, 14}},
        {"x y", {20, 21}}, {" x y", {22, 20, 21}}, {"same", {30}},        {" same", {30}}};
    auto it = vocab.find(text);
    return it == vocab.end() ? std::vector<int32_t>{} : it->second;
  }
  std::vector<int32_t> encode_with_special_text(std::string_view text) const override {
    return encode(text, false);
  }
  std::string decode(std::span<const int32_t>, bool) const override { return ""; }
  std::string id_to_piece(int32_t) const override { return ""; }
  bool is_special(int32_t) const override { return false; }
  int64_t vocab_size() const override { return 100; }
  std::optional<int32_t> bos_token_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_token_id() const override { return std::nullopt; }
};

TEST(RequestFieldsSampling, BadWordsTokenIdsFollowVllmsRule) {
  const WordTokenizer tok;
  // lstrip'ed; the spaced variant kept when its first id differs and its
  // length is the same.
  EXPECT_EQ(
      bad_words_token_ids(tok, {"  hello", "a b", "x y", "same"}),
      (std::vector<std::vector<int32_t>>{{10}, {11}, {12, 13, 14}, {15, 13, 14}, {20, 21}, {30}}));
  EXPECT_THROW(bad_words_token_ids(tok, {"   "}), std::invalid_argument);
}

TEST(RequestFieldsSampling, BadWordsAreFilled) {
  // Byte tokenizer: " ab" is one token longer than "ab", so only "ab" is kept.
  ParsedRequest r = ok(completion({{"bad_words", {" ab", "c"}}}));
  EXPECT_EQ(r.sampling.bad_words, (std::vector<std::string>{" ab", "c"}));
  EXPECT_EQ(r.sampling.bad_words_token_ids,
            (std::vector<std::vector<int32_t>>{{'a' + 3, 'b' + 3}, {'c' + 3}}));
  EXPECT_EQ(err(chat({{"bad_words", {1}}})).param, "bad_words");
  // Bounded before it is tokenized: 256 KiB of words in all.
  const OpenAIError big =
      err(chat({{"bad_words", {std::string(200'000, 'a'), std::string(100'000, 'b')}}}));
  EXPECT_EQ(big.param, "bad_words");
  EXPECT_EQ(big.message, "bad_words holds more than 256 KiB of text");
  // A request's own chat template is bounded too (parsed per request).
  const OpenAIError tmpl =
      err(chat({{"chat_template", std::string(70'000, 'x')}}, trusting_model()));
  EXPECT_EQ(tmpl.param, "chat_template");
  EXPECT_NE(tmpl.message.find("at most 64 KiB"), std::string::npos) << tmpl.message;
  json kwargs = json::object();
  for (int i = 0; i < 1025; ++i) kwargs[std::to_string(i)] = i;  // (GCC 12 -Wrestrict: no "k" +)
  const OpenAIError many = err(chat({{"chat_template_kwargs", kwargs}}));
  EXPECT_EQ(many.param, "chat_template_kwargs");
  EXPECT_EQ(many.message, "chat_template_kwargs has 1025 keys; at most 1024");
  EXPECT_EQ(err(chat({{"bad_words", {""}}})).param, "bad_words");
  EXPECT_EQ(err(chat({{"bad_words", "ab"}})).param, "bad_words");
}

TEST(RequestFieldsSampling, PromptLogprobs) {
  EXPECT_EQ(ok(completion({{"prompt_logprobs", 3}})).sampling.prompt_logprobs, 3);
  EXPECT_EQ(ok(chat({{"prompt_logprobs", 0}})).sampling.prompt_logprobs, 0);
  EXPECT_FALSE(ok(completion({})).sampling.prompt_logprobs.has_value());
  EXPECT_NE(err(completion({{"prompt_logprobs", 21}}))
                .message.find("prompt_logprobs must be between 0 and 20, got 21."),
            std::string::npos);
  EXPECT_EQ(err(completion({{"prompt_logprobs", -1}})).param, "prompt_logprobs");
  // With stream=true: a 400 when > 0, as vLLM's check_logprobs.
  OpenAIError e = err(chat({{"prompt_logprobs", 2}, {"stream", true}}));
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_NE(e.message.find("`prompt_logprobs` are not available when `stream=True`."),
            std::string::npos);
  ok(completion({{"prompt_logprobs", 0}, {"stream", true}}));
  // /generate returns text only: refused rather than computed and dropped.
  EXPECT_EQ(err(generate({{"prompt_logprobs", 1}})).param, "prompt_logprobs");
}

}  // namespace
}  // namespace pagoda
