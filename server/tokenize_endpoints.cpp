#include "server/tokenize_endpoints.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/openai_fields.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"
#include "server/request_model.h"

namespace pagoda {

using nlohmann::json;
using namespace openai_fields;

namespace {
// Logs the top-level keys of `obj` outside `known` (vLLM's
// TokenizeCompletionRequest / DetokenizeRequest fields), as the generation
// endpoints do: they do nothing here, and the client should hear of it.
void warn_unknown(const json& obj, std::initializer_list<std::string_view> known) {
  std::vector<std::string> unknown;
  for (const auto& item : obj.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) unknown.push_back(item.key());
  request_model::warn_unknown_fields(unknown);
}
}  // namespace

std::variant<json, OpenAIError> tokenize_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    check_model(obj, model);
    std::vector<int32_t> ids;
    // (The messages path's unknown fields are logged by the chat parser.)
    if (!get(obj, "messages"))
      warn_unknown(obj, {"model", "prompt", "add_special_tokens", "return_token_strs"});
    if (get(obj, "messages")) {
      // The chat path exactly: render and tokenize through the chat parser
      // (a one-token request; only its prompt is used). The body is read
      // again keeping its key order (tools' schemas and tool-call arguments
      // print in the order sent); it parsed strictly above.
      nlohmann::ordered_json chat = nlohmann::ordered_json::parse(body);
      chat.erase("max_tokens");
      chat.erase("max_completion_tokens");
      chat.erase("return_token_strs");  // /tokenize's own field, not the chat model's
      chat["max_tokens"] = 1;
      ParseResult r = parse_chat_request(chat.dump(), model, /*check_context=*/false);
      if (auto* e = std::get_if<OpenAIError>(&r)) return *e;
      ids = std::get<ParsedRequest>(r).prompt_token_ids;
    } else if (const json* prompt = get(obj, "prompt"); prompt && prompt->is_string() &&
                                                         prompt->get_ref<const std::string&>().empty()) {
      // "" is a fair question here, unlike for generation (where it is a
      // 400): vLLM answers count 0, or the BOS alone with special tokens on.
      ids = encode_prompt(*model.tokenizer, "", get_bool(obj, "add_special_tokens").value_or(true));
    } else {
      // The completions path exactly: the same prompt parsing and tokenization.
      if (!prompt) fail("'prompt' or 'messages' is required", "prompt");
      if (const size_t count = count_prompts(obj); count != 1)
        fail(fmt::format("/tokenize takes one prompt, got a list of {}", count), "prompt");
      std::vector<PromptInput> prompts = completion_prompts(obj, model, PromptLength::kBounded);
      ids = std::move(prompts.front().token_ids);
    }
    // vLLM: tokenizer.convert_ids_to_tokens(ids), the vocabulary's pieces.
    json token_strs = nullptr;
    if (get_bool(obj, "return_token_strs").value_or(false)) {
      token_strs = json::array();
      for (int32_t id : ids) token_strs.push_back(model.tokenizer->id_to_piece(id));
    }
    return json{{"count", ids.size()}, {"max_model_len", model.max_model_len}, {"tokens", ids},
                {"token_strs", std::move(token_strs)}};
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

std::variant<json, OpenAIError> detokenize_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    check_model(obj, model);
    warn_unknown(obj, {"model", "tokens"});
    const json* t = get(obj, "tokens");
    if (!t) fail("'tokens' is required", "tokens");
    if (!t->is_array()) fail(fmt::format("'tokens' must be a list of token ids, got {}", type_name(*t)), "tokens");
    std::vector<int32_t> ids;
    // Every id the model can generate decodes: those past the tokenizer's
    // vocabulary (a padded embedding, e.g. Qwen2) give "" as in HF's decode.
    const int64_t vocab = std::max(model.tokenizer->vocab_size(), model.model_vocab_size);
    for (const json& v : *t) {
      const std::optional<int64_t> i = openai_fields::as_integer(v);
      if (!i)
        fail(fmt::format("'tokens' must be a list of token ids; found a {}",
                         v.is_number() ? v.dump() : type_name(v)),
             "tokens");
      const int64_t id = *i;
      if (id < 0 || id >= vocab) fail(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, vocab), "tokens");
      ids.push_back(static_cast<int32_t>(id));
    }
    return json{{"prompt", model.tokenizer->decode(ids, /*skip_special_tokens=*/false)}};
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

}  // namespace pagoda
