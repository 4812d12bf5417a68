// ChatTemplate: parse once, render per request (see chat_template.h).
// Variables as transformers' apply_chat_template passes them: messages,
// add_generation_prompt, bos_token, eos_token, any extra kwargs (tools,
// enable_thinking, ...), plus the global raise_exception(msg).
#include "engine/chat/chat_template.h"

#include "engine/chat/content_detection.h"
#include "engine/chat/jinja_interpreter.h"
#include "engine/chat/jinja_lexer.h"
#include "engine/chat/jinja_parser.h"

namespace pagoda {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->body = jinja::parse(jinja::tokenize(source));
  } catch (const ChatTemplateError&) {
    throw;
  } catch (const std::exception& e) {
    throw ChatTemplateError(std::string("chat template parsing failed: ") + e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

namespace {

// raise_exception's message goes into a 400's JSON: at most 4 KiB of it
// (cut at a character boundary, then "...").
std::string capped_message(std::string m) {
  constexpr size_t kMax = 4096;
  if (m.size() <= kMax) return m;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80) --cut;
  m.resize(cut);
  return m + "...";
}

template <class Json>
std::string render_with(const jinja::Body& body, const Json& messages, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token, const Json& extra) {
  using jinja::Value;
  try {
    jinja::Dict globals;
    globals.emplace_back("raise_exception", Value::callable(
                                                [](const jinja::CallArgs& a) -> Value {
                                                  throw ChatTemplateError(capped_message(
                                                      a.pos.empty() ? "" : a.pos[0].to_string()));
                                                },
                                                "raise_exception"));
    if (extra.is_object())
      for (const auto& [k, v] : extra.items()) globals.emplace_back(k, Value::from_json(v));
    globals.emplace_back("messages", Value::from_json(messages));
    globals.emplace_back("add_generation_prompt", Value(add_generation_prompt));
    globals.emplace_back("bos_token", Value(bos_token));
    globals.emplace_back("eos_token", Value(eos_token));
    jinja::Interpreter interp;
    return interp.render(body, std::move(globals));
  } catch (const ChatTemplateError&) {
    throw;
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: report, never crash the caller
    throw ChatTemplateError(std::string("chat template rendering failed: ") + e.what());
  }
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::json& extra) const {
  return render_with(impl_->body, messages, add_generation_prompt, bos_token, eos_token, extra);
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const std::string& bos_token, const std::string& eos_token,
                                         const nlohmann::ordered_json& extra) const {
  return render_with(impl_->body, messages, add_generation_prompt, bos_token, eos_token, extra);
}

bool ChatTemplate::iterates_message_content() const {
  return jinja::iterates_message_content(impl_->body);
}

}  // namespace pagoda
