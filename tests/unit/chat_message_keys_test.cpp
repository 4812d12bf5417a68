// Chat messages reach the template as vLLM rebuilds them: role, content and
// only the keys vLLM keeps (tool_calls with their arguments as objects,
// reasoning, tool_call_id, name, task, a developer's tools), against Python
// Jinja2's rendering of that conversation
// (tests/data/chat_message_keys_reference.py says which vLLM rules).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <variant>

#include "engine/chat/chat_template.h"
#include "server/chat_content_format.h"
#include "server/chat_renderer.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"
#include "tests/support/chat_serving_model.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

ordered_json reference() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/chat_message_keys_reference.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

void expect_reference(const ParseResult& r, const ordered_json& c) {
  if (c.contains("error")) {
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r)) << "vLLM: " << c["error"];
    const OpenAIError& e = std::get<OpenAIError>(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.message, c["error"].get<std::string>());
    return;
  }
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  EXPECT_EQ(std::get<ParsedRequest>(r).prompts.at(0).text, c["rendered"].get<std::string>());
}

TEST(ChatMessageKeys, TemplateSeesTheMessagesVllmBuilds) {
  const ordered_json ref = reference();
  ASSERT_EQ(ref["cases"].size(), 5u);
  for (const ordered_json& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ChatContentFormat format =
        *parse_chat_content_format(c["content_format"].get<std::string>());
    const ServingModel m = test::chat_serving_model(ref["template"].get<std::string>(), format);
    ordered_json body = {
        {"messages", c["messages"]}, {"add_generation_prompt", false}, {"max_tokens", 1}};
    expect_reference(parse_chat_request(body.dump(), m), c);
  }
}

}  // namespace
}  // namespace pagoda
