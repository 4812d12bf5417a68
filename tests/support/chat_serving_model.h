// A ServingModel for the chat-rendering tests: the stories260K tokenizer
// (any tokenizer will do: the prompt text is compared) with `source` as the
// server's chat template, its content format resolved as make_serving_model
// resolves it, and `flag` as --chat-template-content-format.
#pragma once
#include <memory>
#include <string>

#include "engine/chat/chat_template.h"
#include "server/chat_content_format.h"
#include "server/chat_renderer.h"
#include "server/serving_model.h"
#include "tests/support/test_engine.h"

namespace pagoda::test {

inline ServingModel chat_serving_model(const std::string& source, ChatContentFormat flag,
                                       const std::string& bos = "", const std::string& eos = "") {
  ServingModel m;
  m.served_model_name = std::string("m");  // (GCC 12 -Wrestrict false positive on a literal)
  m.max_model_len = 4096;
  m.tokenizer = load_tokenizer(stories_dir());
  auto tmpl = std::make_shared<ChatTemplate>(source);
  m.has_chat_template = true;
  m.chat_template_content_format = flag;
  m.template_content_format = resolve_chat_content_format(ChatContentFormat::kAuto, tmpl.get());
  m.chat_renderer = make_chat_renderer(tmpl, bos, eos);
  return m;
}

}  // namespace pagoda::test
