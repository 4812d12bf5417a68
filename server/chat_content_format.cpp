#include "server/chat_content_format.h"

#include "engine/chat/chat_template.h"

namespace pagoda {

std::optional<ChatContentFormat> parse_chat_content_format(std::string_view name) {
  if (name == "auto") return ChatContentFormat::kAuto;
  if (name == "string") return ChatContentFormat::kString;
  if (name == "openai") return ChatContentFormat::kOpenAI;
  return std::nullopt;
}

std::string_view chat_content_format_name(ChatContentFormat format) {
  switch (format) {
    case ChatContentFormat::kAuto:
      return "auto";
    case ChatContentFormat::kString:
      return "string";
    case ChatContentFormat::kOpenAI:
      return "openai";
  }
  return "auto";
}

ChatContentFormat resolve_chat_content_format(ChatContentFormat given,
                                              const ChatTemplate* chat_template) {
  if (given != ChatContentFormat::kAuto) return given;
  return chat_template && chat_template->iterates_message_content() ? ChatContentFormat::kOpenAI
                                                                    : ChatContentFormat::kString;
}

}  // namespace pagoda
