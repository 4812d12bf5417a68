// Shared setup of the fuzz targets: the ServingModels the protocol layer
// sees, built once per process: the bundled models/stories260K (its real
// SentencePiece tokenizer and generation_config.json) with a small Llama-2
// style chat template (stories260K has none), and Qwen2's byte-level BPE
// tokenizer with ChatML; templates are rendered by the real ChatTemplate.
// No engine: requests that pass validation go no further than a fake
// engine handle.
#pragma once
#include <memory>
#include <string>

#include "engine/chat/chat_template.h"
#include "engine/model/generation_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat_renderer.h"
#include "server/engine_handle.h"
#include "server/serving_model.h"

namespace pagoda::fuzz {

inline const char* kChatTemplate =
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}<<SYS>>{{ m['content'] "
    "}}<</SYS>>"
    "{% elif m['role'] == 'user' %}[INST] {{ m['content'] | trim }} [/INST]{% else %} {{ "
    "m['content'] }}"
    "{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %} {% endif %}";

// A ServingModel around `tokenizer` whose server template is `chat_template`
// (rendered by the real ChatTemplate, as make_serving_model does).
inline ServingModel make_model(const std::string& name, const std::string& dir,
                               std::shared_ptr<const Tokenizer> tokenizer,
                               const std::string& chat_template, const std::string& bos,
                               const std::string& eos) {
  ServingModel m;
  m.served_model_name = name;
  m.model_dir = dir;
  m.max_model_len = 512;
  m.tokenizer = std::move(tokenizer);
  m.generation_config = GenerationConfig::from_dir(dir);
  m.has_chat_template = true;
  m.chat_renderer = make_chat_renderer(std::make_shared<ChatTemplate>(chat_template), bos, eos);
  return m;
}

// models/stories260K: SentencePiece, the Llama-2-style template above.
inline const ServingModel& stories_model() {
  static const ServingModel model = [] {
    const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/models/stories260K";
    return make_model("stories", dir, load_tokenizer(dir), kChatTemplate, "<s>", "</s>");
  }();
  return model;
}

// Qwen2's byte-level BPE tokenizer (../shared/tokenizers/qwen2) with a
// ChatML template: the other tokenizer kind behind the same parsers.
inline const ServingModel& qwen2_model() {
  static const ServingModel model = [] {
    const std::string dir = std::string(PAGODA_SHARED_DIR) + "/tokenizers/qwen2";
    return make_model(
        "qwen2", dir, load_tokenizer(dir),
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
        "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n{% "
        "endif %}",
        "", "<|endoftext|>");
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
