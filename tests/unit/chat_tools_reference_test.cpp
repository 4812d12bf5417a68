// Chat requests with tools through the protocol layer and the real Qwen2.5
// chat template (shared/models/tiny-random-qwen2-chat's tokenizer_config.json)
// against the renderings of tests/data/qwen25_tools_reference.json (Jinja2 set
// up as transformers' apply_chat_template; tests/data/qwen25_tools_reference.py
// says how): tools in the order sent, assistant tool_calls with their
// arguments text parsed and printed with tojson, tool messages grouped into
// one user turn; over HTTP, /v1/ws and /tokenize alike. Also the tool fields'
// validation (server/chat_tools.h).
#include <gtest/gtest.h>

#include <fstream>

#include "engine/chat/chat_template.h"
#include "server/chat_renderer.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"
#include "server/tokenize_endpoints.h"
#include "server/ws_protocol.h"

namespace pagoda {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kQwenDir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat";

ordered_json reference() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen25_tools_reference.json");
  return ordered_json::parse(in);
}

ServingModel qwen_model(bool auto_tools) {
  ServingModel m;
  m.served_model_name = "tiny-random-qwen2-chat";
  m.max_model_len = 32768;
  m.tokenizer = load_tokenizer(kQwenDir);
  TokenizerConfig tc = TokenizerConfig::from_dir(kQwenDir);
  auto tmpl = std::make_shared<ChatTemplate>(tc.chat_template);
  m.has_chat_template = true;
  m.chat_renderer = make_chat_renderer(tmpl, tc.bos_token, tc.eos_token);
  m.enable_auto_tool_choice = auto_tools;
  m.tool_call_parser = auto_tools ? ToolParserKind::kHermes : ToolParserKind::kNone;
  return m;
}

TEST(ChatToolsReference, Qwen25RendersAsTransformers) {
  const ordered_json ref = reference();
  ASSERT_EQ(ref["cases"].size(), 5u);
  const ServingModel none = qwen_model(false);
  const ServingModel hermes = qwen_model(true);
  for (const ordered_json& c : ref["cases"]) {
    const std::string name = c["name"];
    const std::string want = c["rendered"];
    // As sent (tool_choice "none": no parser needed).
    ParseResult r = parse_chat_request(c["request"].dump(), none);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r))
        << name << ": " << std::get<OpenAIError>(r).message;
    const ParsedRequest& req = std::get<ParsedRequest>(r);
    EXPECT_EQ(req.prompts[0].text, want) << name;
    EXPECT_EQ(req.tool_parser, ToolParserKind::kNone) << name;
    // tool_choice left out: "auto" with tools (vLLM's default), same prompt.
    ordered_json body = c["request"];
    body.erase("tool_choice");
    r = parse_chat_request(body.dump(), hermes);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r))
        << name << ": " << std::get<OpenAIError>(r).message;
    EXPECT_EQ(std::get<ParsedRequest>(r).prompts[0].text, want) << name;
    EXPECT_EQ(std::get<ParsedRequest>(r).tool_parser,
              body.contains("tools") ? ToolParserKind::kHermes : ToolParserKind::kNone)
        << name;
    // The same over /v1/ws (the message is parsed there) ...
    ordered_json ws = {{"type", "chat"}, {"id", "a"}};
    for (const auto& [k, v] : c["request"].items()) ws[k] = v;
    auto msg = parse_ws_message(ws.dump());
    ASSERT_TRUE(std::holds_alternative<WsClientMessage>(msg)) << name;
    r = parse_ws_generation(std::get<WsClientMessage>(msg), none);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r))
        << name << ": " << std::get<OpenAIError>(r).message;
    EXPECT_EQ(std::get<ParsedRequest>(r).prompts[0].text, want) << name << " (ws)";
    // ... and /tokenize counts the same prompt.
    auto t = tokenize_request(c["request"].dump(), none);
    ASSERT_TRUE(std::holds_alternative<json>(t)) << name;
    EXPECT_EQ(std::get<json>(t)["tokens"], json(req.prompt_token_ids)) << name << " (/tokenize)";
  }
}

// One tool, the request's other fields as given.
std::string with_tool(const std::string& extra) {
  // Appended piecewise: GCC 12's -Wrestrict misfires on literal + string.
  std::string body =
      R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}])";
  body += extra;
  body += '}';
  return body;
}

OpenAIError error_of(const std::string& body, const ServingModel& m) {
  ParseResult r = parse_chat_request(body, m);
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r)) << body;
  return std::holds_alternative<OpenAIError>(r) ? std::get<OpenAIError>(r) : OpenAIError{};
}

TEST(ChatToolsReference, ToolChoiceValidation) {
  const ServingModel none = qwen_model(false);
  const ServingModel hermes = qwen_model(true);
  // "auto" (explicit or the default with tools) needs the server's flags.
  for (const std::string& body : {with_tool(""), with_tool(R"(, "tool_choice": "auto")")}) {
    OpenAIError e = error_of(body, none);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.message,
              "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to "
              "be set");
    EXPECT_EQ(e.param, "tool_choice");
  }
  // required / named: guided decoding to the tools' schema, no server flag
  // needed (vLLM); tests/unit/tool_choice_forced_test.cpp covers them.
  for (const char* choice :
       {R"(, "tool_choice": "required")",
        R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})"}) {
    ParseResult r = parse_chat_request(with_tool(choice), none);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).message;
    EXPECT_TRUE(std::get<ParsedRequest>(r).sampling.guide) << choice;
  }
  OpenAIError e;
  e = error_of(with_tool(R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})"),
               hermes);
  EXPECT_NE(e.message.find("does not match any of the specified `tools`"), std::string::npos);
  e = error_of(with_tool(R"(, "tool_choice": "sometimes")"), hermes);
  EXPECT_NE(e.message.find("Invalid value for `tool_choice`"), std::string::npos);
  e = error_of(R"({"messages": [{"role": "user", "content": "q"}], "tool_choice": "auto"})",
               hermes);
  EXPECT_EQ(e.message, "When using `tool_choice`, `tools` must be set.");
  e = error_of(
      R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]})",
      hermes);
  EXPECT_EQ(e.param, "tools");
  // Arguments that are not JSON in the history become {} (vLLM's
  // _postprocess_messages: the conversation must stay usable); a call that
  // is not an object is vLLM's 400.
  ParseResult bad_args =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant",
    "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f",
    "arguments": "{not json"}}]}]})",
                         hermes);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(bad_args))
      << std::get<OpenAIError>(bad_args).message;
  EXPECT_NE(std::get<ParsedRequest>(bad_args).prompts.at(0).text.find(
                R"({"name": "f", "arguments": {}})"),
            std::string::npos)
      << std::get<ParsedRequest>(bad_args).prompts.at(0).text;
  e = error_of(
      R"~({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": ["f()"]}]})~",
      hermes);
  EXPECT_EQ(e.message, "assistant tool_calls entries must be objects.");
  // "none" and tools absent: accepted without the flags.
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(
      parse_chat_request(with_tool(R"(, "tool_choice": "none")"), none)));
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "tool_choice": "none"})", none)));
}

// An empty tools list with tool_choice "auto" is accepted as vLLM accepts
// it (its check is that `tools` is present): the prompt is the one without
// tools and the output is content, no calls parsed. "auto" still needs the
// server's flags, as in vLLM; a named tool_choice cannot match an empty list.
TEST(ChatToolsReference, EmptyToolsWithAutoIsAsNoTools) {
  const ServingModel none = qwen_model(false);
  const ServingModel hermes = qwen_model(true);
  const std::string plain_body = R"({"messages": [{"role": "user", "content": "q"}]})";
  // Appended piecewise: GCC 12's -Wrestrict misfires on literal + string.
  auto with = [&](const char* extra) {
    std::string b = plain_body;
    b.pop_back();
    b += extra;
    b += '}';
    return b;
  };
  ParseResult plain = parse_chat_request(plain_body, hermes);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(plain)) << std::get<OpenAIError>(plain).message;
  ParseResult r = parse_chat_request(with(R"(, "tools": [], "tool_choice": "auto")"), hermes);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).message;
  const ParsedRequest& req = std::get<ParsedRequest>(r);
  EXPECT_EQ(req.tool_parser, ToolParserKind::kNone);
  EXPECT_FALSE(req.sampling.guide);
  EXPECT_EQ(req.prompts[0].text, std::get<ParsedRequest>(plain).prompts[0].text);
  EXPECT_EQ(req.prompt_token_ids, std::get<ParsedRequest>(plain).prompt_token_ids);
  OpenAIError e = error_of(with(R"(, "tools": [], "tool_choice": "auto")"), none);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message,
            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to "
            "be set");
  e = error_of(
      with(R"(, "tools": [], "tool_choice": {"type": "function", "function": {"name": "f"}})"),
      hermes);
  EXPECT_EQ(e.param, "tool_choice");
  EXPECT_NE(e.message.find("does not match any of the specified `tools`"), std::string::npos)
      << e.message;
}

}  // namespace
}  // namespace pagoda
