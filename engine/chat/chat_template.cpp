// ChatTemplate: parse once, render per request (see chat_template.h).
// Variables as transformers' apply_chat_template passes them: messages,
// add_generation_prompt, bos_token, eos_token, any extra kwargs (tools,
// enable_thinking, ...), plus the global raise_exception(msg).
#include "engine/chat/chat_template.h"

#include "engine/chat/jinja_interpreter.h"
#include "engine/chat/jinja_lexer.h"
#include "engine/chat/jinja_parser.h"

namespace pagoda {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = jinja::parse(jinja::tokenize(source));
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::json& extra) const {
  using jinja::Value;
  jinja::Dict globals;
  globals.emplace_back("raise_exception", Value::callable(
                                              [](const jinja::CallArgs& a) -> Value {
                                                throw ChatTemplateError(a.pos.empty() ? "" : a.pos[0].to_string());
                                              },
                                              "raise_exception"));
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) globals.emplace_back(k, Value::from_json(v));
  globals.emplace_back("messages", Value::from_json(messages));
  globals.emplace_back("add_generation_prompt", Value(add_generation_prompt));
  globals.emplace_back("bos_token", Value(bos_token));
  globals.emplace_back("eos_token", Value(eos_token));
  jinja::Interpreter interp;
  return interp.render(impl_->body, std::move(globals));
}

}  // namespace pagoda
