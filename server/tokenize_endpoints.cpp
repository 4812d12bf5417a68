#include "server/tokenize_endpoints.h"

#include <fmt/format.h>

#include "server/openai_fields.h"
#include "server/openai_request.h"

namespace pagoda {

using nlohmann::json;
using namespace openai_fields;

namespace {

struct TooDeep {};

json parse_object(std::string_view body) {
  json obj;
  try {
    obj = json::parse(
        body,
        [](int depth, json::parse_event_t, json&) {
          if (depth > 64) throw TooDeep{};
          return true;
        },
        /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    fail("Request body nests JSON deeper than 64 levels");
  }
  if (obj.is_discarded()) fail("Request body is not valid JSON");
  if (!obj.is_object()) fail(fmt::format("Request body must be a JSON object, got {}", type_name(obj)));
  return obj;
}

}  // namespace

std::variant<json, OpenAIError> tokenize_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_object(body);
    check_model(obj, model);
    std::vector<int32_t> ids;
    if (get(obj, "messages")) {
      // The chat path exactly: render and tokenize through the chat parser
      // (a one-token request; only its prompt is used).
      json chat = obj;
      chat.erase("max_tokens");
      chat.erase("max_completion_tokens");
      chat["max_tokens"] = 1;
      ParseResult r = parse_chat_request(chat.dump(), model);
      if (auto* e = std::get_if<OpenAIError>(&r)) return *e;
      ids = std::get<ParsedRequest>(r).prompt_token_ids;
    } else {
      auto prompt = get_string(obj, "prompt");
      if (!prompt) fail("'prompt' (a string) or 'messages' is required", "prompt");
      ids = encode_prompt(*model.tokenizer, *prompt, get_bool(obj, "add_special_tokens").value_or(true));
    }
    return json{{"count", ids.size()}, {"max_model_len", model.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

std::variant<json, OpenAIError> detokenize_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_object(body);
    check_model(obj, model);
    const json* t = get(obj, "tokens");
    if (!t) fail("'tokens' is required", "tokens");
    if (!t->is_array()) fail(fmt::format("'tokens' must be a list of token ids, got {}", type_name(*t)), "tokens");
    std::vector<int32_t> ids;
    int64_t vocab = model.tokenizer->vocab_size();
    for (const json& v : *t) {
      if (!v.is_number_integer()) fail(fmt::format("'tokens' must be a list of token ids; found a {}", type_name(v)), "tokens");
      int64_t id = v.get<int64_t>();
      if (id < 0 || id >= vocab) fail(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, vocab), "tokens");
      ids.push_back(static_cast<int32_t>(id));
    }
    return json{{"prompt", model.tokenizer->decode(ids, /*skip_special_tokens=*/false)}};
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

}  // namespace pagoda
