// Shared setup of the fuzz targets: the ServingModel the protocol layer sees,
// built once per process from the bundled models/stories260K (its real
// SentencePiece tokenizer and generation_config.json) with a small Llama-2
// style chat template rendered by the real ChatTemplate (stories260K has
// none). No engine: requests that pass validation go no further than a fake
// engine handle.
#pragma once
#include <memory>
#include <string>

#include "engine/chat/chat_template.h"
#include "engine/model/generation_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/engine_handle.h"
#include "server/serving_model.h"

namespace pagoda::fuzz {

inline const char* kChatTemplate =
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}<<SYS>>{{ m['content'] "
    "}}<</SYS>>"
    "{% elif m['role'] == 'user' %}[INST] {{ m['content'] | trim }} [/INST]{% else %} {{ "
    "m['content'] }}"
    "{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %} {% endif %}";

inline const ServingModel& stories_model() {
  static const ServingModel model = [] {
    const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/models/stories260K";
    ServingModel m;
    m.served_model_name = "stories";
    m.model_dir = dir;
    m.max_model_len = 512;
    m.tokenizer = load_tokenizer(dir);
    m.generation_config = GenerationConfig::from_dir(dir);
    m.has_chat_template = true;
    auto tmpl = std::make_shared<ChatTemplate>(kChatTemplate);
    m.chat_renderer = [tmpl](const nlohmann::json& messages, const ChatRenderOptions& o) {
      if (!o.chat_template.empty())
        return ChatTemplate(o.chat_template)
            .render(messages, o.add_generation_prompt, "<s>", "</s>", o.variables);
      return tmpl->render(messages, o.add_generation_prompt, "<s>", "</s>", o.variables);
    };
    return m;
  }();
  return model;
}

// Accepts every request and forgets it (its output channel is dropped).
class NullEngine final : public EngineHandle {
 public:
  void add_request(std::unique_ptr<GenerateRequest>) override {}
  void abort_request(const std::string&) override {}
  EngineStats stats() const override { return {}; }
  bool running() const override { return true; }
};

}  // namespace pagoda::fuzz
