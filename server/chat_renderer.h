// make_chat_renderer: the ChatRenderer (server/serving_model.h) of a model's
// chat template, as the server, the offline front ends and the tests build it.
#pragma once
#include <memory>
#include <string>

#include "server/serving_model.h"

namespace pagoda {

class ChatTemplate;

// A request's own template (ChatRenderOptions::parsed_chat_template, else
// its chat_template source, parsed here) renders that request alone;
// otherwise `tmpl`, one render at a time (it is shared by every network
// thread). A null `tmpl` makes a chat without its own template throw
// ChatTemplateError ("the model has no chat template"). bos / eos: tokenizer_config.json's
// bos_token and eos_token, the template variables of those names (transformers'
// apply_chat_template).
ChatRenderer make_chat_renderer(std::shared_ptr<const ChatTemplate> tmpl, std::string bos,
                                std::string eos);

}  // namespace pagoda
