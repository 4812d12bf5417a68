// ServingModel: what the OpenAI protocol layer needs to know about the one
// model this server serves. Built once at startup (server/model_setup.h),
// then read concurrently by every network thread (all members are const or
// thread-safe to call).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/generation_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/prompt_tokenizer.h"

namespace pagoda {

// Renders a chat: messages (array of {role, content: string, ...}) →
// prompt text. add_generation_prompt as in transformers'
// apply_chat_template. Throws ChatTemplateError (its what() is reported to
// the client as a 400).
using ChatRenderer =
    std::function<std::string(const nlohmann::json& messages, bool add_generation_prompt)>;

struct ServingModel {
  std::string served_model_name;  // the `model` clients send and get back
  std::string model_dir;          // shown as /v1/models' root
  int64_t max_model_len = 0;      // prompt + completion tokens, at most
  std::shared_ptr<const Tokenizer> tokenizer;
  GenerationConfig generation_config;  // defaults for fields a request omits
  ChatRenderer chat_renderer;     // empty: no chat template (chat → 400)
};

}  // namespace pagoda
