// tool_choice "required" and a named function: the schema guided decoding
// uses (server/tool_choice_schema.h, against vLLM's
// ChatCompletionRequest._get_guided_json_from_tool), the request side
// (guide set, conflicts and unsupported schemas a 400), the calls read from
// the constrained output (server/forced_tool_calls.h, against vLLM's
// serving_chat.py), and the responses built from them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/chat/chat_template.h"
#include "engine/guided/guide.h"
#include "engine/guided/json_schema_regex.h"
#include "engine/guided/regex_dfa.h"
#include "server/chat_renderer.h"
#include "server/forced_tool_calls.h"
#include "server/openai_fields.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prompt_tokenizer.h"
#include "server/python_json.h"
#include "server/tool_choice_schema.h"
#include "sse_test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kQwenDir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat";

ordered_json tool(const std::string& name, const ordered_json& params) {
  return ordered_json{
      {"type", "function"},
      {"function", {{"name", name}, {"description", nullptr}, {"parameters", params}}}};
}

const ordered_json kWeatherParams = ordered_json::parse(
    R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]})");

TEST(ToolChoiceSchema, RequiredIsVllmsArrayOfAnyOf) {
  const ordered_json tools =
      ordered_json::array({tool("get_weather", kWeatherParams), tool("now", nullptr),
                           tool("empty", ordered_json::object())});
  const ordered_json want = ordered_json::parse(R"({
    "type": "array", "minItems": 1,
    "items": {"type": "object", "anyOf": [
      {"properties": {"name": {"type": "string", "enum": ["get_weather"]},
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                     "days": {"type": "integer"}}, "required": ["city"]}},
       "required": ["name", "parameters"]},
      {"properties": {"name": {"type": "string", "enum": ["now"]},
                      "parameters": {"type": "object", "properties": {}}},
       "required": ["name", "parameters"]},
      {"properties": {"name": {"type": "string", "enum": ["empty"]},
                      "parameters": {"type": "object", "properties": {}}},
       "required": ["name", "parameters"]}]}})");
  EXPECT_EQ(required_tools_schema(tools).dump(), want.dump());
}

TEST(ToolChoiceSchema, RequiredMovesDefsToTheTop) {
  const ordered_json a = ordered_json::parse(
      R"({"type": "object", "properties": {"p": {"$ref": "#/$defs/Pt"}}, "required": ["p"],
          "$defs": {"Pt": {"type": "object", "properties": {"x": {"type": "integer"}},
                           "required": ["x"]}}})");
  ordered_json b = a;
  const ordered_json s = required_tools_schema(ordered_json::array({tool("a", a), tool("b", b)}));
  ASSERT_TRUE(s.contains("$defs"));
  EXPECT_EQ(s["$defs"].size(), 1u);
  EXPECT_FALSE(s["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
  // The references resolve at the top: the schema compiles and matches.
  const std::string re = guided::json_schema_to_regex(s.dump(), guided::kDefaultWhitespace);
  guided::ByteDfa dfa = guided::ByteDfa::compile(re);
  EXPECT_TRUE(dfa.matches(R"([{"name": "a", "parameters": {"p": {"x": 1}}}])"));
  EXPECT_TRUE(dfa.matches(
      R"([{"name": "b", "parameters": {"p": {"x": 2}}}, {"name": "a", "parameters": {"p": {"x": 3}}}])"));
  EXPECT_FALSE(dfa.matches(R"([{"name": "c", "parameters": {"p": {"x": 1}}}])"));
  EXPECT_FALSE(dfa.matches(R"([{"name": "a", "parameters": {"p": {"y": 1}}}])"));
  EXPECT_FALSE(dfa.matches("[]"));  // minItems 1
  // One $defs name, two schemas: vLLM's error.
  b["$defs"]["Pt"]["properties"]["x"]["type"] = "string";
  try {
    required_tools_schema(ordered_json::array({tool("a", a), tool("b", b)}));
    ADD_FAILURE() << "conflicting $defs accepted";
  } catch (const openai_fields::RequestFieldError& e) {
    EXPECT_EQ(e.error.message,
              "Tool definition 'Pt' has multiple schemas, which is not supported.");
    EXPECT_EQ(e.error.param, "tools");
  }
}

TEST(ToolChoiceSchema, NamedIsTheToolsParameters) {
  const ordered_json tools =
      ordered_json::array({tool("get_weather", kWeatherParams), tool("now", nullptr)});
  EXPECT_EQ(named_tool_schema(tools, "get_weather"), kWeatherParams);
  EXPECT_EQ(named_tool_schema(tools, "now").dump(), R"({"type":"object","properties":{}})");
  const std::string re = guided::json_schema_to_regex(
      named_tool_schema(tools, "get_weather").dump(), guided::kDefaultWhitespace);
  guided::ByteDfa dfa = guided::ByteDfa::compile(re);
  EXPECT_TRUE(dfa.matches(R"({"city": "Paris", "days": 3})"));
  EXPECT_FALSE(dfa.matches(R"({"days": 3})"));
}

ServingModel qwen_model() {
  ServingModel m;
  m.served_model_name = "tiny-random-qwen2-chat";
  m.max_model_len = 32768;
  m.tokenizer = load_tokenizer(kQwenDir);
  TokenizerConfig tc = TokenizerConfig::from_dir(kQwenDir);
  auto tmpl = std::make_shared<ChatTemplate>(tc.chat_template);
  m.has_chat_template = true;
  m.chat_renderer = make_chat_renderer(tmpl, tc.bos_token, tc.eos_token);
  return m;  // no --enable-auto-tool-choice: required / named need none
}

std::string body(const std::string& tools, const std::string& extra) {
  std::string b = R"({"messages": [{"role": "user", "content": "q"}], "tools": )";
  b += tools;
  b += extra;
  b += '}';
  return b;
}

const std::string kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "now"}}])";

TEST(ToolChoiceRequest, RequiredAndNamedSetTheGuide) {
  const ServingModel m = qwen_model();
  ParseResult r = parse_chat_request(body(kTools, R"(, "tool_choice": "required")"), m);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).message;
  const ParsedRequest& req = std::get<ParsedRequest>(r);
  EXPECT_EQ(req.forced_tool.kind, ForcedToolChoice::Kind::kRequired);
  ASSERT_TRUE(req.sampling.guide);
  EXPECT_TRUE(req.sampling.guide->matches(
      R"([{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters": {"city": "x"}}])"));
  EXPECT_FALSE(req.sampling.guide->matches(R"({"city": "x"})"));

  r = parse_chat_request(
      body(kTools, R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"),
      m);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).message;
  const ParsedRequest& named = std::get<ParsedRequest>(r);
  EXPECT_EQ(named.forced_tool.kind, ForcedToolChoice::Kind::kNamed);
  EXPECT_EQ(named.forced_tool.name, "get_weather");
  ASSERT_TRUE(named.sampling.guide);
  EXPECT_TRUE(named.sampling.guide->matches(R"({"city": "Paris"})"));
  EXPECT_FALSE(named.sampling.guide->matches(R"([{"name": "get_weather"}])"));
}

TEST(ToolChoiceRequest, RequiredWithNoToolsIsNone) {
  ParseResult r = parse_chat_request(body("[]", R"(, "tool_choice": "required")"), qwen_model());
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).message;
  EXPECT_EQ(std::get<ParsedRequest>(r).forced_tool.kind, ForcedToolChoice::Kind::kNone);
  EXPECT_FALSE(std::get<ParsedRequest>(r).sampling.guide);
}

TEST(ToolChoiceRequest, AnotherConstraintIsA400NamingIt) {
  const ServingModel m = qwen_model();
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "guided_json": {"type": "object"})", "guided_json"},
           {R"(, "guided_regex": "a+")", "guided_regex"},
           {R"(, "guided_grammar": "root ::= \"a\"")", "guided_grammar"},
           {R"(, "response_format": {"type": "json_object"})", "response_format"},
           {R"(, "structured_outputs": {"choice": ["a"]})", "structured_outputs"}}) {
    for (const char* choice :
         {R"(, "tool_choice": "required")",
          R"(, "tool_choice": {"type": "function", "function": {"name": "now"}})"}) {
      std::string fields = choice;
      fields += extra;
      ParseResult r = parse_chat_request(body(kTools, fields), m);
      ASSERT_TRUE(std::holds_alternative<OpenAIError>(r)) << extra << choice;
      const OpenAIError& e = std::get<OpenAIError>(r);
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, param);
      EXPECT_NE(e.message.find(fmt::format("cannot be combined with '{}'", param)),
                std::string::npos)
          << e.message;
    }
  }
  // response_format text constrains nothing: allowed.
  ParseResult r = parse_chat_request(
      body(kTools, R"(, "tool_choice": "required", "response_format": {"type": "text"})"), m);
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(r));
}

TEST(ToolChoiceRequest, UnsupportedSchemaIsA400NamingTheKeyword) {
  const std::string tools =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"a": {"not": {"type": "string"}}}}}}])";
  for (const char* choice :
       {R"(, "tool_choice": "required")",
        R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})"}) {
    ParseResult r = parse_chat_request(body(tools, choice), qwen_model());
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r)) << choice;
    const OpenAIError& e = std::get<OpenAIError>(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tools");
    EXPECT_NE(e.message.find("keyword 'not' is not supported"), std::string::npos) << e.message;
  }
}

int g_ids = 0;
std::string next_id() { return fmt::format("call-{}", g_ids++); }

// Feeds text in pieces of `step` bytes; returns every delta.
std::vector<ToolCallDelta> feed_all(ForcedToolCalls& p, const std::string& text, size_t step) {
  std::vector<ToolCallDelta> all;
  for (size_t i = 0; i < text.size(); i += step)
    for (ToolCallDelta& d : p.feed(std::string_view(text).substr(i, step)).calls)
      all.push_back(std::move(d));
  return all;
}

const std::string kRequiredOut =
    R"([{"name": "get_weather", "parameters": {"city": "Pa\"ris}", "days":3, "x": [1, {"y": "]"}]}},)"
    R"( {"name": "now", "parameters": {}}])";

TEST(ForcedToolCalls, RequiredStreamsEachCallInAnySplit) {
  for (size_t step : {size_t{1}, size_t{2}, size_t{5}, size_t{17}, kRequiredOut.size()}) {
    ForcedToolCalls p({ForcedToolChoice::Kind::kRequired, ""}, next_id);
    std::vector<ToolCallDelta> d = feed_all(p, kRequiredOut, step);
    ASSERT_GE(d.size(), 2u) << step;
    std::vector<std::string> names, args, ids;
    for (const ToolCallDelta& x : d) {
      if (!x.id.empty()) {
        ASSERT_EQ(static_cast<size_t>(x.index), names.size()) << step;
        names.push_back(x.name);
        ids.push_back(x.id);
        args.push_back(x.arguments);
      } else {
        ASSERT_EQ(static_cast<size_t>(x.index) + 1, names.size()) << step;
        EXPECT_TRUE(x.name.empty());
        args.back() += x.arguments;
      }
    }
    EXPECT_EQ(names, (std::vector<std::string>{"get_weather", "now"})) << step;
    // The parameters' text verbatim: no item "}", no "," between, no "]".
    EXPECT_EQ(args, (std::vector<std::string>{
                        R"({"city": "Pa\"ris}", "days":3, "x": [1, {"y": "]"}]})", "{}"}))
        << step;
    EXPECT_TRUE(p.called());
    // Non-streamed: re-read whole, arguments as Python's json.dumps.
    std::string error;
    auto calls = p.final_calls(&error);
    ASSERT_TRUE(calls) << error;
    ASSERT_EQ(calls->size(), 2u);
    EXPECT_EQ((*calls)[0].arguments, R"({"city": "Pa\"ris}", "days": 3, "x": [1, {"y": "]"}]})");
    EXPECT_EQ((*calls)[0].id, ids[0]);
    EXPECT_EQ((*calls)[1].name, "now");
    EXPECT_EQ((*calls)[1].arguments, "{}");
    EXPECT_EQ((*calls)[1].id, ids[1]);
  }
}

TEST(ForcedToolCalls, RequiredCutShortIsAnErrorNonStreamed) {
  ForcedToolCalls p({ForcedToolChoice::Kind::kRequired, ""}, next_id);
  std::vector<ToolCallDelta> d =
      feed_all(p, R"([{"name": "get_weather", "parameters": {"city": "Pa)", 3);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].name, "get_weather");
  std::string error;
  EXPECT_FALSE(p.final_calls(&error));
  EXPECT_NE(error.find("not complete JSON"), std::string::npos) << error;
  ForcedToolCalls nothing({ForcedToolChoice::Kind::kRequired, ""}, next_id);
  EXPECT_TRUE(nothing.feed("").calls.empty());
  EXPECT_FALSE(nothing.called());
  EXPECT_FALSE(nothing.final_calls(&error));
}

TEST(ForcedToolCalls, NamedIsOneCallOfTheWholeText) {
  ForcedToolCalls p({ForcedToolChoice::Kind::kNamed, "get_weather"}, next_id);
  std::vector<ToolCallDelta> d = feed_all(p, R"({"city": "Paris"})", 4);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_EQ(d[0].name, "get_weather");
  EXPECT_FALSE(d[0].id.empty());
  EXPECT_EQ(d[0].arguments, "{\"ci");  // the first text rides with the name (vLLM)
  std::string args;
  for (const ToolCallDelta& x : d) args += x.arguments;
  EXPECT_EQ(args, R"({"city": "Paris"})");
  auto calls = p.final_calls(nullptr);
  ASSERT_TRUE(calls);
  EXPECT_EQ((*calls)[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ((*calls)[0].id, d[0].id);
}

TEST(PythonJson, DumpsAsPython) {
  EXPECT_EQ(python_json_dumps(ordered_json::parse(
                R"({"b":1,"a":[true,null,"é\n",{"c":-2.5}],"s":"x\/y","e":{},"l":[]})")),
            R"({"b": 1, "a": [true, null, "é\n", {"c": -2.5}], "s": "x/y", "e": {}, "l": []})");
}

ParsedRequest forced_req(ForcedToolChoice choice, bool stream) {
  ParsedRequest r;
  r.kind = ApiKind::kChat;
  r.request_id = "chatcmpl-abc";
  r.model = "qwen";
  r.prompt_token_ids = {1, 2, 3};
  r.stream = stream;
  r.forced_tool = std::move(choice);
  return r;
}

std::vector<RequestOutput> deltas(const std::string& text, size_t step, FinishReason why) {
  std::vector<RequestOutput> out;
  for (size_t i = 0; i < text.size(); i += step) {
    RequestOutput d;
    d.text = text.substr(i, step);
    d.token_ids = {static_cast<int32_t>(100 + i)};
    d.prompt_tokens = 3;
    d.completion_tokens = static_cast<int64_t>(out.size() + 1);
    d.finished = i + step >= text.size();
    d.finish_reason = d.finished ? why : FinishReason::kNone;
    out.push_back(std::move(d));
  }
  return out;
}

using testing_sse::sse_chunks;

TEST(ForcedToolCallsResponse, NonStreamedAsVllm) {
  // Named: content "", the text as arguments, finish_reason the engine's.
  ParsedRequest named = forced_req({ForcedToolChoice::Kind::kNamed, "get_weather"}, false);
  ChoiceAssembler a(named);
  for (const RequestOutput& d : deltas(R"({"city": "Paris"})", 3, FinishReason::kStop)) a.add(d);
  json c = completion_response(named, a.choices())["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["message"]["content"], "");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(call["function"],
            (json{{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}));

  // Required: one call per item, arguments json.dumps'd.
  ParsedRequest req = forced_req({ForcedToolChoice::Kind::kRequired, ""}, false);
  ChoiceAssembler b(req);
  for (const RequestOutput& d :
       deltas(R"([{"name":"now","parameters":{"tz":"UTC"}}])", 4, FinishReason::kStop))
    b.add(d);
  EXPECT_TRUE(b.choices()[0].tool_call_error.empty());
  c = completion_response(req, b.choices())["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["message"]["content"], "");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"],
            (json{{"name", "now"}, {"arguments", R"({"tz": "UTC"})"}}));

  // Cut short: the choice says why (the HTTP front end answers 400).
  ChoiceAssembler cut(req);
  for (const RequestOutput& d : deltas(R"([{"name":"now","param)", 4, FinishReason::kLength))
    cut.add(d);
  EXPECT_NE(cut.choices()[0].tool_call_error.find("not complete JSON"), std::string::npos);
}

TEST(ForcedToolCallsResponse, StreamedAsVllm) {
  ParsedRequest req = forced_req({ForcedToolChoice::Kind::kRequired, ""}, true);
  ChoiceAssembler a(req);
  StreamFormatter f(req);
  std::string sse = f.begin();
  for (const RequestOutput& d : deltas(
           R"([{"name": "now", "parameters": {"tz": "UTC"}}, {"name": "now", "parameters": {}}])",
           3, FinishReason::kStop))
    sse += f.format({a.add(d)});
  std::vector<json> chunks = sse_chunks(sse);
  ASSERT_GE(chunks.size(), 3u);
  std::vector<json> calls;
  for (const json& c : chunks) {
    const json& delta = c["choices"][0]["delta"];
    if (!delta.contains("role")) {
      EXPECT_FALSE(delta.contains("content")) << delta;
    }
    if (delta.contains("tool_calls"))
      for (const json& t : delta["tool_calls"]) calls.push_back(t);
  }
  std::vector<std::string> args(2);
  int headers = 0;
  for (const json& t : calls) {
    if (t.contains("id")) {
      ++headers;
      EXPECT_EQ(t["type"], "function");
      EXPECT_EQ(t["function"]["name"], "now");
    }
    args.at(t["index"].get<size_t>()) += t["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(headers, 2);
  EXPECT_EQ(args, (std::vector<std::string>{R"({"tz": "UTC"})", "{}"}));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace pagoda
