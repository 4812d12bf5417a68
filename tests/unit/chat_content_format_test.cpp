// The chat template content format (vLLM's --chat-template-content-format,
// LLM.chat's chat_template_content_format): "auto" detected on vLLM's own
// example templates as vLLM's test_resolve_content_format_examples expects,
// and chats with list content rendered through the request pipeline as
// Jinja2 renders them (tests/data/content_format_reference.py).
#include "server/chat_content_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <variant>

#include "engine/chat/chat_template.h"
#include "server/chat_renderer.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"
#include "tests/support/chat_serving_model.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kData = std::string(PAGODA_SOURCE_DIR) + "/tests/data";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string vllm_template(const std::string& name) {
  const std::string s = read(kData + "/vllm_chat_templates/" + name);
  EXPECT_FALSE(s.empty()) << name;
  return s;
}

json reference() { return json::parse(read(kData + "/content_format_reference.json")); }

using test::chat_serving_model;

ChatContentFormat format_of(const json& c) {
  return *parse_chat_content_format(c["content_format"].get<std::string>());
}

std::string source_of(const json& ref, const json& c) {
  return c["template"].is_null() ? ref["print_template"].get<std::string>()
                                 : vllm_template(c["template"].get<std::string>());
}

json chat_body(const json& c) {
  json body = {{"messages", c["messages"]},
               {"add_generation_prompt", c["add_generation_prompt"]},
               {"max_tokens", 1}};
  if (!c["kwargs"].empty()) body["chat_template_kwargs"] = c["kwargs"];
  return body;
}

void expect_reference(const ParseResult& r, const json& c) {
  if (c.contains("error")) {
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r)) << "Jinja2: " << c["error"];
    EXPECT_EQ(std::get<OpenAIError>(r).status, 400);
    return;
  }
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  EXPECT_EQ(std::get<ParsedRequest>(r).prompts.at(0).text, c["rendered"].get<std::string>());
}

// vLLM's tests/entrypoints/test_chat_utils.py, test_resolve_content_format_examples.
TEST(ChatContentFormat, AutoDetectsAsVllmOnItsExampleTemplates) {
  const std::pair<const char*, ChatContentFormat> expected[] = {
      {"template_alpaca.jinja", ChatContentFormat::kString},
      {"template_chatml.jinja", ChatContentFormat::kString},
      {"template_falcon.jinja", ChatContentFormat::kString},
      {"template_dse_qwen2_vl.jinja", ChatContentFormat::kOpenAI},
      {"template_vlm2vec_phi3v.jinja", ChatContentFormat::kOpenAI},
      {"tool_chat_template_llama3.2_json.jinja", ChatContentFormat::kOpenAI},
  };
  for (const auto& [name, format] : expected) {
    SCOPED_TRACE(name);
    const ChatTemplate t(vllm_template(name));
    EXPECT_EQ(resolve_chat_content_format(ChatContentFormat::kAuto, &t), format);
    // A format given is kept whatever the template does.
    EXPECT_EQ(resolve_chat_content_format(ChatContentFormat::kString, &t),
              ChatContentFormat::kString);
    EXPECT_EQ(resolve_chat_content_format(ChatContentFormat::kOpenAI, &t),
              ChatContentFormat::kOpenAI);
  }
  EXPECT_EQ(resolve_chat_content_format(ChatContentFormat::kAuto, nullptr),
            ChatContentFormat::kString);
}

// The server's flag: each case in its format, and under auto where auto
// detects that format on the template.
TEST(ChatContentFormat, ServerFlagRendersAsJinja2) {
  const json ref = reference();
  ASSERT_EQ(ref["cases"].size(), 10u);
  for (const json& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string source = source_of(ref, c);
    const ServingModel m = chat_serving_model(source, format_of(c), c["bos_token"], c["eos_token"]);
    expect_reference(parse_chat_request(chat_body(c).dump(), m), c);
    if (m.template_content_format == format_of(c)) {
      const ServingModel a =
          chat_serving_model(source, ChatContentFormat::kAuto, c["bos_token"], c["eos_token"]);
      expect_reference(parse_chat_request(chat_body(c).dump(), a), c);
    }
  }
}

// The reference case named `name`; nullptr when there is none.
const json* find_case(const json& ref, const std::string& name) {
  for (const json& c : ref["cases"])
    if (c["name"] == name) return &c;
  return nullptr;
}

// vLLM's chatml template as the server's, request templates trusted
// (--trust-request-chat-template), with case c's special tokens.
ServingModel trusting_chatml(const json& c) {
  ServingModel m = chat_serving_model(vllm_template("template_chatml.jinja"),
                                      ChatContentFormat::kAuto, c["bos_token"], c["eos_token"]);
  m.trust_request_chat_template = true;
  return m;
}

// A request's own chat_template is detected for that request under auto.
TEST(ChatContentFormat, AutoDetectsTheRequestTemplate) {
  const json ref = reference();
  const json* found = find_case(ref, "dse_qwen2_vl_openai_parts");
  ASSERT_NE(found, nullptr) << "case not found";
  const json& c = *found;
  ServingModel m = trusting_chatml(c);
  ASSERT_EQ(m.template_content_format, ChatContentFormat::kString);
  json body = chat_body(c);
  body["chat_template"] = source_of(ref, c);
  expect_reference(parse_chat_request(body.dump(), m), c);
  // The same template as chat_template_kwargs.chat_template (vLLM renders
  // with it, and detects the content format on it).
  body.erase("chat_template");
  body["chat_template_kwargs"]["chat_template"] = source_of(ref, c);
  expect_reference(parse_chat_request(body.dump(), m), c);
}

// A request's own template is parsed once: the renderer gets the parse the
// content format was detected on (ChatRenderOptions::parsed_chat_template)
// and renders with it rather than parsing the source again.
TEST(ChatContentFormat, RequestTemplateIsParsedOnce) {
  const json ref = reference();
  const json* found = find_case(ref, "dse_qwen2_vl_openai_parts");
  ASSERT_NE(found, nullptr) << "case not found";
  const json& c = *found;
  ServingModel m = trusting_chatml(c);
  const ChatRenderer real = m.chat_renderer;
  int handed_parsed = 0;
  m.chat_renderer = [&](const nlohmann::ordered_json& messages, const ChatRenderOptions& o) {
    if (o.parsed_chat_template && o.parsed_chat_template->iterates_message_content())
      ++handed_parsed;
    return real(messages, o);
  };
  json body = chat_body(c);
  body["chat_template"] = source_of(ref, c);
  expect_reference(parse_chat_request(body.dump(), m), c);
  EXPECT_EQ(handed_parsed, 1);
  // make_chat_renderer renders the parse it is handed, not the source.
  ChatRenderOptions o;
  o.chat_template = "{{ 'source' }}";
  o.parsed_chat_template = std::make_shared<const ChatTemplate>("{{ 'parsed' }}");
  EXPECT_EQ(real(nlohmann::ordered_json::array(), o), "parsed");
}

// Offline (LLM.chat): the chat's own chat_template_content_format, which
// replaces the model's auto.
TEST(ChatContentFormat, OfflineChatTakesItsOwnFormat) {
  const json ref = reference();
  for (const json& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ServingModel m = chat_serving_model(source_of(ref, c), ChatContentFormat::kAuto,
                                              c["bos_token"], c["eos_token"]);
    json obj = chat_body(c);
    obj["chat_template_content_format"] = c["content_format"];
    expect_reference(parse_offline_object(obj, m), c);
  }
  const ServingModel m =
      chat_serving_model(vllm_template("template_chatml.jinja"), ChatContentFormat::kAuto);
  json bad = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"chat_template_content_format", "list"}};
  ParseResult r = parse_offline_object(bad, m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(r));
  EXPECT_EQ(std::get<OpenAIError>(r).param, "chat_template_content_format");
  json not_chat = {{"prompt", "Hi"}, {"chat_template_content_format", "openai"}};
  r = parse_offline_object(not_chat, m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(r));
  EXPECT_EQ(std::get<OpenAIError>(r).param, "chat_template_content_format");
}

// continue_final_message on a list content continues its last text part
// (transformers' apply_chat_template), and echo repeats the parts' texts
// joined with "\n" (vLLM's serving_chat).
TEST(ChatContentFormat, ContinueFinalMessageAndEchoWithParts) {
  const ServingModel m = chat_serving_model(vllm_template("template_dse_qwen2_vl.jinja"),
                                            ChatContentFormat::kAuto, "", "<|endoftext|>");
  ASSERT_EQ(m.template_content_format, ChatContentFormat::kOpenAI);
  const json parts = {{{"type", "text"}, {"text", "Once"}}, {{"type", "text"}, {"text", " upon"}}};
  json body = {
      {"messages",
       {{{"role", "user"}, {"content", "Tell me"}}, {{"role", "assistant"}, {"content", parts}}}},
      {"add_generation_prompt", false},
      {"continue_final_message", true},
      {"echo", true},
      {"max_tokens", 1}};
  ParseResult r = parse_chat_request(body.dump(), m);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  const ParsedRequest& p = std::get<ParsedRequest>(r);
  EXPECT_EQ(p.prompts.at(0).text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nTell "
            "me<|im_end|>\n<|im_start|>assistant\nOnce upon");
  EXPECT_EQ(p.chat_echo, "Once\n upon");
}

// The part types vLLM's _parse_chat_message_content_part reads as text
// (vllm/entrypoints/chat_utils.py): plain strings, text / input_text /
// output_text ("text"), refusal ("refusal"), thinking ("thinking"); a text
// or refusal part with a null value is skipped. "string" joins the texts
// with "\n"; "openai" rebuilds each as {"type": "text", "text"}.
TEST(ChatContentFormat, TextLikePartsAsVllmReadsThem) {
  const json parts = json::array({"hi",
                                  {{"type", "refusal"}, {"refusal", "no"}},
                                  {{"type", "input_text"}, {"text", "a"}},
                                  {{"type", "output_text"}, {"text", "b"}},
                                  {{"type", "thinking"}, {"thinking", "t"}},
                                  {{"type", "text"}, {"text", nullptr}},
                                  {{"type", "refusal"}}});
  const json body = {{"messages", {{{"role", "user"}, {"content", parts}}}},
                     {"add_generation_prompt", false},
                     {"max_tokens", 1}};
  const ServingModel s =
      chat_serving_model(vllm_template("template_chatml.jinja"), ChatContentFormat::kString);
  ParseResult r = parse_chat_request(body.dump(), s);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  EXPECT_EQ(std::get<ParsedRequest>(r).prompts.at(0).text, "<|im_start|>user\nhi\nno\na\nb\nt");

  // openai: the template sees five text parts.
  const ServingModel o = chat_serving_model(
      "{% for m in messages %}{% for p in m['content'] %}[{{ p['type'] }}:{{ p['text'] }}]"
      "{% endfor %}{% endfor %}",
      ChatContentFormat::kOpenAI);
  r = parse_chat_request(body.dump(), o);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  EXPECT_EQ(std::get<ParsedRequest>(r).prompts.at(0).text,
            "[text:hi][text:no][text:a][text:b][text:t]");

  // Any other part is a 400 naming messages.
  for (const json& bad : {json{{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}},
                          json{{"type", "input_text"}, {"text", nullptr}},
                          json{{"type", "text"}, {"text", 5}}, json{{"text", "no type"}}}) {
    SCOPED_TRACE(bad.dump());
    const json b = {{"messages", {{{"role", "user"}, {"content", json::array({bad})}}}},
                    {"max_tokens", 1}};
    r = parse_chat_request(b.dump(), s);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r));
    EXPECT_EQ(std::get<OpenAIError>(r).status, 400);
    EXPECT_EQ(std::get<OpenAIError>(r).param, "messages");
  }
}

}  // namespace
}  // namespace pagoda
