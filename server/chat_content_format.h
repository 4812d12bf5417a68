// The chat template content format (vLLM's --chat-template-content-format
// and LLM.chat's chat_template_content_format): how a message's content
// reaches the chat template.
#pragma once
#include <optional>
#include <string_view>

namespace pagoda {

class ChatTemplate;

enum class ChatContentFormat {
  kAuto,    // "string" or "openai", by what the template does with content
  kString,  // content is a string: text parts joined with "\n"
  kOpenAI,  // content is a list of {"type": "text", "text": ...} parts
};

// "auto", "string" or "openai"; nullopt for anything else.
std::optional<ChatContentFormat> parse_chat_content_format(std::string_view name);
// The name parse_chat_content_format takes.
std::string_view chat_content_format_name(ChatContentFormat format);

// vLLM's resolve_chat_template_content_format: `given` unless it is kAuto;
// then kOpenAI for a template that loops over a message's content
// (ChatTemplate::iterates_message_content) and kString for any other, or
// for no template.
ChatContentFormat resolve_chat_content_format(ChatContentFormat given,
                                              const ChatTemplate* chat_template);

}  // namespace pagoda
