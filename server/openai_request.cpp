#include "server/openai_request.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "engine/chat/chat_template.h"
#include "engine/sample/sampler.h"
#include "server/openai_fields.h"
#include "server/strict_json.h"

namespace pagoda {

using nlohmann::json;
using namespace openai_fields;

std::string make_request_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

json parse_request_body(std::string_view body) {
  std::variant<json, std::string> parsed = parse_strict_json(body, "Request body");
  if (auto* message = std::get_if<std::string>(&parsed)) fail(std::move(*message));
  json& obj = std::get<json>(parsed);
  if (!obj.is_object()) fail(fmt::format("Request body must be a JSON object, got {}", type_name(obj)));
  return std::move(obj);
}

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<int32_t> token_ids_from_json(const json& arr, const ServingModel& model) {
  std::vector<int32_t> ids;
  int64_t vocab = model.tokenizer ? model.tokenizer->vocab_size() : 0;
  for (const json& t : arr) {
    if (!t.is_number_integer())
      fail(fmt::format("'prompt' must be a string or a list of token ids; found a {} in the list", type_name(t)), "prompt");
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      fail(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, vocab), "prompt");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

PromptInput prompt_from_ids(std::vector<int32_t> ids, const ServingModel& model) {
  if (ids.empty()) fail("'prompt' must not be empty", "prompt");
  PromptInput p;
  p.text = model.tokenizer->decode(ids, /*skip_special_tokens=*/false);
  p.token_ids = std::move(ids);
  return p;
}

PromptInput prompt_from_text(const std::string& text, const json& obj, const ServingModel& model) {
  PromptInput p;
  p.text = text;
  p.token_ids = encode_prompt(*model.tokenizer, text, get_bool(obj, "add_special_tokens").value_or(true));
  // The engine would refuse it too, but only after a stream's 200 header.
  if (p.token_ids.empty()) fail("The prompt is empty (no tokens)", "prompt");
  return p;
}

}  // namespace

std::vector<PromptInput> completion_prompts(const json& obj, const ServingModel& model) {
  const json* p = get(obj, "prompt");
  if (!p) fail("'prompt' is required", "prompt");
  if (p->is_string()) return {prompt_from_text(p->get_ref<const std::string&>(), obj, model)};
  if (!p->is_array())
    fail(fmt::format("'prompt' must be a string, a list of strings, a list of token ids or a list of "
                     "token-id lists, got {}", type_name(*p)),
         "prompt");
  if (p->empty()) fail("'prompt' must not be empty", "prompt");
  std::vector<PromptInput> out;
  if ((*p)[0].is_string() || (*p)[0].is_array()) {
    for (const json& item : *p) {
      if (item.is_string()) {
        out.push_back(prompt_from_text(item.get_ref<const std::string&>(), obj, model));
      } else if (item.is_array()) {
        out.push_back(prompt_from_ids(token_ids_from_json(item, model), model));
      } else {
        fail(fmt::format("'prompt' lists must hold only strings or only token-id lists; found a {}",
                         type_name(item)),
             "prompt");
      }
    }
    return out;
  }
  out.push_back(prompt_from_ids(token_ids_from_json(*p, model), model));
  return out;
}

namespace {

void parse_completion_logprobs(const json& obj, ParsedRequest& req) {
  if (auto lp = get_int(obj, "logprobs")) {
    if (*lp < 0 || *lp > 5) fail(fmt::format("logprobs must be between 0 and 5, got {}.", *lp), "logprobs");
    req.sampling.logprobs = static_cast<int>(*lp);
  }
  req.echo = get_bool(obj, "echo").value_or(false);
  if (auto suffix = get_string(obj, "suffix"); suffix && !suffix->empty())
    fail("suffix is not supported yet", "suffix");
}

// prompt_logprobs (temporary: merged with the declared request model)
// vLLM's field, after `stream` is known: an int in [0, max_logprobs = 20];
// with stream=true only 0 (vLLM: "`prompt_logprobs` are not available when
// `stream=True`."). Completions with echo and logprobs and no
// prompt_logprobs take prompt_logprobs = logprobs (vLLM's
// CompletionRequest.to_sampling_params): the echoed prompt's logprobs.
void parse_prompt_logprobs(const json& obj, ParsedRequest& req) {
  if (auto k = get_int(obj, "prompt_logprobs")) {
    if (*k < 0 || *k > kMaxLogprobs)
      fail(fmt::format("prompt_logprobs must be between 0 and {}, got {}.", kMaxLogprobs, *k),
           "prompt_logprobs");
    if (req.stream && *k > 0)
      fail("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
    req.sampling.prompt_logprobs = static_cast<int>(*k);
  }
  if (!req.sampling.prompt_logprobs && req.echo && req.sampling.logprobs)
    req.sampling.prompt_logprobs = req.sampling.logprobs;
}

void parse_chat_logprobs(const json& obj, ParsedRequest& req) {
  bool logprobs = get_bool(obj, "logprobs").value_or(false);
  auto top = get_int(obj, "top_logprobs");
  if (top && (*top < 0 || *top > 20))
    fail(fmt::format("top_logprobs must be between 0 and 20, got {}.", *top), "top_logprobs");
  if (top && *top > 0 && !logprobs)
    fail("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  if (logprobs) req.sampling.logprobs = static_cast<int>(top.value_or(0));
  if (get_bool(obj, "echo").value_or(false)) fail("echo is not supported yet on chat completions", "echo");
}

void reject_chat_unsupported(const json& obj) {
  if (const json* tools = get(obj, "tools")) {
    if (!tools->is_array()) fail(fmt::format("'tools' must be a list, got {}", type_name(*tools)), "tools");
    if (!tools->empty()) fail("tools (function calling) are not supported yet", "tools");
  }
  if (const json* tc = get(obj, "tool_choice")) {
    if (!tc->is_string() && !tc->is_object())
      fail(fmt::format("'tool_choice' must be a string or an object, got {}", type_name(*tc)), "tool_choice");
    if (!(tc->is_string() && tc->get_ref<const std::string&>() == "none"))
      fail("tool_choice is not supported yet (function calling); only \"none\"", "tool_choice");
  }
  if (const json* f = get(obj, "functions")) {
    if (!f->is_array()) fail(fmt::format("'functions' must be a list, got {}", type_name(*f)), "functions");
    if (!f->empty()) fail("functions (function calling) are not supported yet", "functions");
  }
  if (const json* fc = get(obj, "function_call")) {
    if (!(fc->is_string() && fc->get_ref<const std::string&>() == "none"))
      fail("function_call is not supported yet (function calling)", "function_call");
  }
  get_bool(obj, "parallel_tool_calls");  // type-checked; moot without tools
}

// Messages with content normalized to a string (null or missing: ""), other keys kept.
json chat_messages(const json& obj) {
  const json* msgs = get(obj, "messages");
  if (!msgs) fail("'messages' is required", "messages");
  if (!msgs->is_array()) fail(fmt::format("'messages' must be a list, got {}", type_name(*msgs)), "messages");
  if (msgs->empty()) fail("'messages' must not be empty", "messages");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) fail(fmt::format("{} must be an object, got {}", where, type_name(m)), "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      fail(fmt::format("{}.role is required and must be a string", where), "messages");
    json msg = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      // OpenAI allows null content (an assistant turn beside tool_calls);
      // vLLM renders it, and a missing one, as "" (an empty part list).
      msg["content"] = "";
    } else if (content->is_array()) {
      std::string text;
      for (size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          fail(fmt::format("{}.content[{}] must be an object with a string 'type'", where, j), "messages");
        const std::string& type = part["type"].get_ref<const std::string&>();
        if (type != "text")
          fail(fmt::format("{}.content[{}] has type '{}': only 'text' parts are supported", where, j, type),
               "messages");
        auto t = part.find("text");
        if (t == part.end() || !t->is_string())
          fail(fmt::format("{}.content[{}].text is required and must be a string", where, j), "messages");
        if (j) text += "\n";
        text += t->get<std::string>();
      }
      msg["content"] = text;
    } else if (!content->is_string()) {
      fail(fmt::format("{}.content must be a string or a list of content parts, got {}", where,
                       type_name(*content)),
           "messages");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void finish_common(const json& obj, const ServingModel& model, ParsedRequest& req) {
  req.tokenizer = model.tokenizer;
  req.stream = get_bool(obj, "stream").value_or(false);
  if (const json* so = get(obj, "stream_options")) {
    if (!so->is_object()) fail(fmt::format("'stream_options' must be an object, got {}", type_name(*so)), "stream_options");
    if (!req.stream) fail("Stream options can only be defined when `stream=True`.", "stream_options");
    req.include_usage = get_bool(*so, "include_usage").value_or(false);
    req.continuous_usage_stats = get_bool(*so, "continuous_usage_stats").value_or(false);
  }
  if (req.stream && req.sampling.best_of && *req.sampling.best_of > req.sampling.n)
    fail(fmt::format("best_of > n is not supported with stream=true (best_of={}, n={})",
                     *req.sampling.best_of, req.sampling.n),
         "best_of");
  for (const PromptInput& p : req.prompts)
    if (req.sampling.min_tokens > p.max_tokens)
      fail(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.", p.max_tokens,
                       req.sampling.min_tokens),
           "min_tokens");
  req.return_token_ids = get_bool(obj, "return_token_ids").value_or(false);
  req.prompt_token_ids = req.prompts.front().token_ids;
  req.sampling.max_tokens = req.prompts.front().max_tokens;
  req.created = unix_now();
}

}  // namespace

ParseResult parse_completion_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    ParsedRequest req;
    req.kind = ApiKind::kCompletion;
    req.model = check_model(obj, model);
    parse_sampling(obj, model, req.sampling);
    parse_completion_logprobs(obj, req);
    auto requested = get_int(obj, "max_tokens");
    req.prompts = completion_prompts(obj, model);
    // Unset max_tokens: 16, as vLLM's CompletionRequest and OpenAI's legacy
    // completions, capped by the room left in the context (vLLM's
    // get_max_tokens takes the smaller). Chat keeps max_model_len - prompt.
    for (PromptInput& p : req.prompts) {
      p.max_tokens = resolve_max_tokens(requested, static_cast<int64_t>(p.token_ids.size()), model.max_model_len,
                                        "prompt", "max_tokens");
      if (!requested) p.max_tokens = std::min(p.max_tokens, kCompletionDefaultMaxTokens);
    }
    finish_common(obj, model, req);
    parse_prompt_logprobs(obj, req);
    req.request_id = make_request_id("cmpl-");
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

ParseResult parse_generate_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    ParsedRequest req;
    req.kind = ApiKind::kGenerate;
    req.model = model.served_model_name;
    parse_sampling(obj, model, req.sampling);
    if (auto lp = get_int(obj, "logprobs"); lp && *lp != 0)
      fail("logprobs is not returned by /generate; use /v1/completions", "logprobs");
    auto prompt = get_string(obj, "prompt");
    if (!prompt) fail("'prompt' is required and must be a string", "prompt");
    req.prompts.push_back(prompt_from_text(*prompt, obj, model));
    PromptInput& p = req.prompts.front();
    p.max_tokens = resolve_max_tokens(get_int(obj, "max_tokens").value_or(16),
                                      static_cast<int64_t>(p.token_ids.size()), model.max_model_len, "prompt",
                                      "max_tokens");
    req.stream = get_bool(obj, "stream").value_or(false);
    json no_stream_options = json::object();
    no_stream_options["stream"] = req.stream;
    finish_common(no_stream_options, model, req);
    req.request_id = make_request_id("gen-");
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

ParseResult parse_chat_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    ParsedRequest req;
    req.kind = ApiKind::kChat;
    req.model = check_model(obj, model);
    reject_chat_unsupported(obj);
    parse_sampling(obj, model, req.sampling);
    parse_chat_logprobs(obj, req);
    const char* max_param = "max_completion_tokens";
    auto requested = get_int(obj, "max_completion_tokens");
    if (!requested) {
      requested = get_int(obj, "max_tokens");
      max_param = "max_tokens";
    }
    json messages = chat_messages(obj);
    bool add_generation_prompt = get_bool(obj, "add_generation_prompt").value_or(true);
    bool add_special_tokens = get_bool(obj, "add_special_tokens").value_or(false);
    if (!model.chat_renderer)
      fail(fmt::format("The model `{}` has no chat template (tokenizer_config.json has no chat_template); "
                       "start the server with --chat-template FILE to use /v1/chat/completions",
                       model.served_model_name),
           "messages");
    std::string prompt;
    try {
      prompt = model.chat_renderer(messages, add_generation_prompt);
    } catch (const ChatTemplateError& e) {
      fail(fmt::format("Chat template error: {}", e.what()), "messages");
    }
    PromptInput p;
    p.token_ids = encode_prompt(*model.tokenizer, prompt, add_special_tokens);
    if (p.token_ids.empty()) fail("The rendered chat prompt is empty", "messages");
    p.max_tokens = resolve_max_tokens(requested, static_cast<int64_t>(p.token_ids.size()), model.max_model_len,
                                      "messages", max_param);
    p.text = std::move(prompt);
    req.prompts.push_back(std::move(p));
    finish_common(obj, model, req);
    parse_prompt_logprobs(obj, req);
    req.request_id = make_request_id("chatcmpl-");
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

}  // namespace pagoda
