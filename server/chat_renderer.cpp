#include "server/chat_renderer.h"

#include <mutex>

#include "engine/chat/chat_template.h"

namespace pagoda {

ChatRenderer make_chat_renderer(std::shared_ptr<const ChatTemplate> tmpl, std::string bos,
                                std::string eos) {
  auto mu = std::make_shared<std::mutex>();
  return [tmpl = std::move(tmpl), mu, bos = std::move(bos), eos = std::move(eos)](
             const nlohmann::ordered_json& messages, const ChatRenderOptions& o) {
    if (o.parsed_chat_template)
      return o.parsed_chat_template->render_ordered(messages, o.add_generation_prompt, bos, eos,
                                                    o.variables);
    if (!o.chat_template.empty())
      return ChatTemplate(o.chat_template)
          .render_ordered(messages, o.add_generation_prompt, bos, eos, o.variables);
    if (!tmpl) throw ChatTemplateError("the model has no chat template");
    std::lock_guard<std::mutex> lock(*mu);
    return tmpl->render_ordered(messages, o.add_generation_prompt, bos, eos, o.variables);
  };
}

}  // namespace pagoda
