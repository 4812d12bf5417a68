// ChatTemplate: renders a Hugging Face chat template (Jinja2 source from
// tokenizer_config.json's chat_template or --chat-template FILE) the way
// transformers' apply_chat_template does: Jinja2 with trim_blocks,
// lstrip_blocks and loop controls, plus raise_exception(msg).
// A small interpreter for the subset real templates use (engine/chat/).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda {

// A template that fails to parse or render, or calls raise_exception(msg)
// (what() is msg for the latter).
class ChatTemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ChatTemplate {
 public:
  // Parses source; throws ChatTemplateError naming the line on a syntax error.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with the variables messages (array of {role, content, ...}),
  // add_generation_prompt, bos_token, eos_token and any extra keys of
  // `extra` (e.g. tools). Throws ChatTemplateError.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const std::string& bos_token, const std::string& eos_token,
                     const nlohmann::json& extra = nlohmann::json::object()) const;

  // Same as render(), but objects keep their key order, as Python dicts do:
  // nlohmann::json sorts keys, so `tools | tojson` or tool-call arguments
  // would print in sorted order; parse requests into ordered_json and call
  // this to match transformers byte for byte.
  std::string render_ordered(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const std::string& bos_token, const std::string& eos_token,
                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // Whether the template loops over a message's content as a list of parts
  // (`{% for part in message['content'] %}`): vLLM's "auto" content format
  // picks "openai" (content as [{"type": "text", "text": ...}]) for such a
  // template and "string" otherwise (engine/chat/content_detection.h).
  bool iterates_message_content() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
