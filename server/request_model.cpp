// The field tables (see request_model.h). Each group is written once and
// the endpoints list the groups they take, as vLLM's request classes share
// their sampling-parameter blocks.
#include "server/request_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include "server/openai_fields.h"

namespace pagoda::request_model {

using nlohmann::json;
using openai_fields::fail;
using openai_fields::type_name;

namespace {

constexpr JsonType kBool = JsonType::kBoolean;
constexpr JsonType kInt = JsonType::kInteger;
constexpr JsonType kNum = JsonType::kNumber;
constexpr JsonType kStr = JsonType::kString;
constexpr JsonType kObj = JsonType::kObject;
constexpr JsonType kList = JsonType::kList;
constexpr Status kNotYet = Status::kNotSupportedYet;
constexpr Status kIgnore = Status::kIgnored;

bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_empty(const json& v) {
  return (v.is_string() || v.is_array() || v.is_object()) && v.empty();
}
bool is_none_choice(const json& v) {
  return v.is_string() && v.get_ref<const std::string&>() == "none";
}

// The SamplingParams keywords every generation endpoint takes (vLLM's
// "sampling params" blocks; /generate passes them to SamplingParams).
std::vector<FieldSpec> sampling_fields() {
  return {
      {.name = "n",
       .type = kInt,
       .default_value = int64_t{1},
       .range = {.lo = 1,
                 .hi = 128,
                 .message = "n must be at least 1, got {}.",
                 .above_message = "n must be at most 128, got {}."},
       .note = "choices per prompt; 128 bounds one request's work"},
      {.name = "best_of",
       .type = kInt,
       .range = {.hi = 128, .message = "best_of must be at most 128, got {}."},
       .note = "candidates per prompt (>= n); unset: n; with use_beam_search: the beams"},
      {.name = "use_beam_search",
       .type = kBool,
       .default_value = false,
       .note = "HF transformers' beam search (engine/beam_search.h): best_of (or n) beams, the n "
               "best returned"},
      {.name = "length_penalty",
       .type = kNum,
       .default_value = 1.0,
       .note = "beam search: score = cumulative logprob / length ** length_penalty"},
      {.name = "early_stopping",
       .type = JsonType::kBooleanOrString,
       .default_value = false,
       .type_text = "a boolean or \"never\"",
       .note = "beam search: true, false or \"never\", as HF transformers"},
      {.name = "temperature",
       .type = kNum,
       .range = {.lo = 0, .message = "temperature must be non-negative, got {}."},
       .note = "unset: generation_config.json, else 1.0"},
      {.name = "top_p",
       .type = kNum,
       .range = {.lo = 0, .hi = 1, .lo_open = true, .message = "top_p must be in (0, 1], got {}."},
       .note = "unset: generation_config.json, else 1.0"},
      {.name = "top_k",
       .type = kInt,
       .range = {.lo = -1, .message = "top_k must be -1 (disable), or at least 1, got {}."},
       .note = "unset: generation_config.json, else 0 (off)"},
      {.name = "min_p",
       .type = kNum,
       .range = {.lo = 0, .hi = 1, .message = "min_p must be in [0, 1], got {}."},
       .note = "unset: generation_config.json, else 0.0"},
      {.name = "seed", .type = kInt, .note = "any int64, as vLLM"},
      {.name = "presence_penalty",
       .type = kNum,
       .default_value = 0.0,
       .range = {.lo = -2, .hi = 2, .message = "presence_penalty must be in [-2, 2], got {}."}},
      {.name = "frequency_penalty",
       .type = kNum,
       .default_value = 0.0,
       .range = {.lo = -2, .hi = 2, .message = "frequency_penalty must be in [-2, 2], got {}."}},
      {.name = "repetition_penalty",
       .type = kNum,
       .range = {.lo = 0,
                 .hi = static_cast<double>(std::numeric_limits<float>::max()),
                 .lo_open = true,
                 .message = "repetition_penalty must be greater than zero, got {}.",
                 .above_message =
                     "repetition_penalty must be at most 3.4028235e+38 (a float), got {}."},
       .note = "unset: generation_config.json, else 1.0"},
      {.name = "stop",
       .type = JsonType::kStringOrList,
       .type_text = "a string or a list of strings"},
      {.name = "stop_token_ids", .type = kList, .type_text = "a list of integers"},
      {.name = "ignore_eos", .type = kBool, .default_value = false},
      {.name = "min_tokens",
       .type = kInt,
       .default_value = int64_t{0},
       .range = {.lo = 0, .message = "min_tokens must be non-negative, got {}."}},
      {.name = "skip_special_tokens", .type = kBool, .default_value = true},
      {.name = "spaces_between_special_tokens",
       .type = kBool,
       .default_value = true,
       .note = "the detokenizer never puts spaces around special tokens: false is HF's "
               "output, true vLLM's fast-tokenizer one (the same text)"},
      {.name = "include_stop_str_in_output", .type = kBool, .default_value = false},
      {.name = "logit_bias", .type = kObj, .type_text = "an object mapping token ids to biases"},
      {.name = "allowed_token_ids",
       .type = kList,
       .type_text = "a list of token ids",
       .note = "non-empty: only these ids can be sampled"},
      {.name = "bad_words",
       .type = kList,
       .type_text = "a list of strings",
       .note = "token sequences never generated (vLLM's update_from_tokenizer)"},
      {.name = "truncate_prompt_tokens",
       .type = kInt,
       .range = {.lo = -1,
                 .message = "truncate_prompt_tokens must be an integer >= 1 or -1, got {}."},
       .note = "keep the prompt's last k tokens; -1: max_model_len"},
      {.name = "prompt_logprobs",
       .type = kInt,
       .range = {.lo = 0, .hi = 20, .message = "prompt_logprobs must be between 0 and 20, got {}."},
       .note = "20: vLLM's default max_logprobs"},
      // Guided decoding (server/guided_fields.h).
      {.name = "guided_json",
       .type = JsonType::kStringOrObject,
       .note = "a JSON schema the output must validate against"},
      {.name = "guided_regex", .type = kStr, .note = "a regex the whole output must match"},
      {.name = "guided_choice",
       .type = kList,
       .type_text = "a list of strings",
       .note = "the output is exactly one of them"},
      {.name = "guided_grammar",
       .type = kStr,
       .note = "EBNF/GBNF grammar (xgrammar syntax, start rule 'root'); the output is a sentence"},
      {.name = "guided_whitespace_pattern",
       .type = kStr,
       .note = "regex between JSON tokens for guided_json/json_object; default \"[ ]?\", \"\" "
               "allows none"},
      {.name = "structured_outputs",
       .type = kObj,
       .note = "vLLM's StructuredOutputsParams: json, regex, choice, grammar, json_object, "
               "structural_tag, whitespace_pattern, disable_any_whitespace, "
               "disable_additional_properties, disable_fallback"},
      {.name = "structural_tag",
       .type = JsonType::kStringOrObject,
       .note = "vLLM's structural tag: the JSON text of {structures: [{begin, schema, end}], "
               "triggers}; free text, and after a trigger a begin, JSON valid for its schema, "
               "its end"},
  };
}

// Known to vLLM, not implemented here yet: 400 when set to anything but
// their default.
std::vector<FieldSpec> not_supported_fields() {
  return {
      {.name = "guided_decoding_backend", .type = kStr, .status = kNotYet},
      {.name = "logits_processors", .type = kList, .status = kNotYet, .accepts = is_empty},
      {.name = "return_tokens_as_token_ids", .type = kBool, .status = kNotYet, .accepts = is_false},
  };
}

// vLLM's extra parameters of both OpenAI endpoints.
std::vector<FieldSpec> openai_fields_common() {
  return {
      {.name = "model", .type = kStr, .note = "absent: the served model; another name: 404"},
      {.name = "stream", .type = kBool, .default_value = false},
      {.name = "stream_options",
       .type = kObj,
       .note = "include_usage, continuous_usage_stats; stream only",
       .object_keys = {"include_usage", "continuous_usage_stats"}},
      {.name = "response_format",
       .type = kObj,
       .note = "text, json_object, json_schema {name, schema, strict, description}, or "
               "structural_tag {structures, triggers} (guided decoding)",
       .object_keys = {"type", "json_schema", "structures", "triggers", "format"}},
      {.name = "user",
       .type = kStr,
       .status = kIgnore,
       .note = "an end-user id; vLLM ignores it too"},
      {.name = "priority",
       .type = kInt,
       .default_value = int64_t{0},
       .note = "FCFS scheduling: non-zero is a 400, as vLLM's default policy answers"},
      {.name = "request_id",
       .type = kStr,
       .note = "the response id is <prefix><request_id>; unset: random"},
      {.name = "return_token_ids", .type = kBool, .default_value = false},
      {.name = "cache_salt",
       .type = kStr,
       .note = "salts the prefix cache: only requests with the same salt share cached blocks "
               "(mixed into the first block's hash, as vLLM); \"\" is a 400"},
      {.name = "kv_transfer_params",
       .type = kObj,
       .status = kIgnore,
       .note = "disaggregated serving; without a KV connector vLLM ignores it too"},
      {.name = "vllm_xargs",
       .type = kObj,
       .status = kIgnore,
       .note = "arguments for custom extensions; none are installed"},
  };
}

std::vector<FieldSpec> completion_only_fields() {
  return {
      {.name = "prompt",
       .type = JsonType::kStringOrList,
       .type_text = "a string, a list of strings, a list of token ids or a list of token-id lists"},
      {.name = "prompt_embeds", .type = JsonType::kAny, .status = kNotYet},
      {.name = "echo", .type = kBool, .default_value = false},
      {.name = "logprobs",
       .type = kInt,
       .range = {.lo = 0, .hi = 20, .message = "logprobs must be between 0 and 20, got {}."},
       .note = "vLLM's max_logprobs (OpenAI's legacy API: 5)"},
      {.name = "max_tokens",
       .type = kInt,
       .default_value = int64_t{16},
       .range = {.lo = 0, .message = "max_tokens must be at least 1, got {}."},
       .note = "capped by the room left in the context; 0 only with echo (the prompt alone)"},
      {.name = "suffix", .type = kStr, .status = kNotYet, .accepts = is_empty},
      {.name = "add_special_tokens", .type = kBool, .default_value = true},
  };
}

std::vector<FieldSpec> chat_only_fields() {
  return {
      {.name = "messages", .type = kList, .type_text = "a list"},
      {.name = "logprobs", .type = kBool, .default_value = false},
      {.name = "top_logprobs",
       .type = kInt,
       .default_value = int64_t{0},
       .range = {.lo = 0, .hi = 20, .message = "top_logprobs must be between 0 and 20, got {}."}},
      {.name = "max_tokens",
       .type = kInt,
       .range = {.lo = 1, .message = "max_tokens must be at least 1, got {}."},
       .note = "deprecated alias of max_completion_tokens"},
      {.name = "max_completion_tokens",
       .type = kInt,
       .range = {.lo = 1, .message = "max_completion_tokens must be at least 1, got {}."},
       .note = "unset: generation_config.json's max_new_tokens, at most the room left in the "
               "context; else that room"},
      {.name = "tools",
       .type = kList,
       .type_text = "a list of tools",
       .note = "passed to the chat template as vLLM passes them (server/chat_tools.h)"},
      {.name = "tool_choice",
       .type = JsonType::kStringOrObject,
       .note = "none | auto (--enable-auto-tool-choice) | required | a named function (guided "
               "decoding; server/tool_choice_schema.h)"},
      {.name = "functions", .type = kList, .status = kNotYet, .accepts = is_empty},
      {.name = "function_call",
       .type = JsonType::kAny,
       .status = kNotYet,
       .accepts = is_none_choice},
      {.name = "parallel_tool_calls",
       .type = kBool,
       .status = kIgnore,
       .note = "every call the parser finds is returned; vLLM ignores it too"},
      {.name = "reasoning_effort", .type = kStr, .status = kNotYet},
      {.name = "include_reasoning",
       .type = kBool,
       .status = kIgnore,
       .default_value = true,
       .note = "no reasoning parser: the reasoning stays in the content, as in vLLM without one"},
      {.name = "echo",
       .type = kBool,
       .default_value = false,
       .note = "the answer starts with the last message's content when that message has the "
               "answer's role (vLLM)"},
      {.name = "add_generation_prompt", .type = kBool, .default_value = true},
      {.name = "continue_final_message", .type = kBool, .default_value = false},
      {.name = "add_special_tokens", .type = kBool, .default_value = false},
      {.name = "documents",
       .type = kList,
       .type_text = "a list of objects",
       .note = "the template's `documents` variable"},
      {.name = "chat_template",
       .type = kStr,
       .note = "this request's template instead of the server's (refused with 400 unless the "
               "server runs with --trust-request-chat-template, as in vLLM)"},
      {.name = "chat_template_kwargs",
       .type = kObj,
       .note = "extra template variables; its \"chat_template\", like chat_template, is the "
               "request's template"},
      {.name = "mm_processor_kwargs",
       .type = kObj,
       .status = kIgnore,
       .note = "multimodal processor arguments; a text-only model has no processor"},
  };
}

std::vector<FieldSpec> generate_only_fields() {
  return {
      {.name = "prompt", .type = kStr, .type_text = "a string"},
      {.name = "stream", .type = kBool, .default_value = false},
      {.name = "max_tokens",
       .type = kInt,
       .default_value = int64_t{16},
       .range = {.lo = 1, .message = "max_tokens must be at least 1, got {}."}},
      {.name = "logprobs", .type = kInt, .note = "not returned by /generate: non-zero is a 400"},
      {.name = "add_special_tokens", .type = kBool, .default_value = true},
  };
}

// LLM.generate / LLM.chat: the prompt forms and the SamplingParams keywords
// that are not in the sampling group (vllm/sampling_params.py's defaults),
// and LLM.chat's keyword arguments for the template.
std::vector<FieldSpec> offline_only_fields() {
  return {
      {.name = "prompt", .type = kStr, .type_text = "a string", .note = "vLLM's TextPrompt"},
      {.name = "prompt_token_ids",
       .type = kList,
       .type_text = "a list of token ids",
       .note = "vLLM's TokensPrompt: used as given"},
      {.name = "messages",
       .type = kList,
       .type_text = "a list of messages",
       .note = "LLM.chat: rendered with the chat template, tokenized without special tokens"},
      {.name = "max_tokens",
       .type = kInt,
       .default_value = int64_t{16},
       .range = {.lo = 1, .message = "max_tokens must be at least 1, got {}."},
       .note = "unset: generation_config.json's max_new_tokens, else vLLM SamplingParams' "
               "default 16; capped by the room left in the context"},
      {.name = "logprobs",
       .type = kInt,
       .range = {.lo = 0, .hi = 20, .message = "logprobs must be between 0 and 20, got {}."},
       .note = "the sampled token's logprob plus the k most likely"},
      {.name = "add_generation_prompt", .type = kBool, .default_value = true},
      {.name = "continue_final_message", .type = kBool, .default_value = false},
      {.name = "detokenize",
       .type = kBool,
       .default_value = true,
       .note = "false: the outputs' text is empty (token ids only); no stop strings"},
      {.name = "chat_template",
       .type = kStr,
       .note = "this chat's template instead of the model's"},
      {.name = "cache_salt",
       .type = kStr,
       .note = "vLLM's TextPrompt / TokensPrompt cache_salt: only prompts with the same salt "
               "share prefix-cache blocks; \"\" (or any false value) is no salt, as vLLM's "
               "renderer"},
      {.name = "chat_template_content_format",
       .type = kStr,
       .note = "LLM.chat's: 'string' (content as text), 'openai' (content as a list of text "
               "parts) or 'auto' (by what the template does with content; the default)"},
      {.name = "chat_template_kwargs", .type = kObj, .note = "extra template variables"},
      {.name = "documents",
       .type = kList,
       .type_text = "a list of objects",
       .note = "the template's `documents` variable"},
      {.name = "tools",
       .type = kList,
       .type_text = "a list of objects",
       .note = "LLM.chat's tools: the template's `tools` variable, as given; each a dict (a JSON "
               "schema), as transformers' apply_chat_template checks"},
  };
}

RequestModel build(std::string_view endpoint,
                   std::initializer_list<std::vector<FieldSpec>> groups) {
  RequestModel m{endpoint, {}};
  for (const auto& g : groups)
    for (const FieldSpec& f : g) {
      if (m.find(f.name))
        throw std::logic_error(fmt::format("{}: field '{}' declared twice", endpoint, f.name));
      m.fields.push_back(f);
    }
  return m;
}

const char* default_type_text(JsonType t) {
  switch (t) {
    case JsonType::kBoolean:
      return "a boolean";
    case JsonType::kInteger:
      return "an integer";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kString:
      return "a string";
    case JsonType::kObject:
      return "an object";
    case JsonType::kList:
      return "a list";
    case JsonType::kStringOrList:
      return "a string or a list";
    case JsonType::kStringOrObject:
      return "a string or an object";
    case JsonType::kBooleanOrString:
      return "a boolean or a string";
    case JsonType::kAny:
      return "a value";
  }
  return "a value";
}

bool type_matches(JsonType t, const json& v) {
  switch (t) {
    case JsonType::kBoolean:
      return v.is_boolean();
    case JsonType::kInteger:
      return true;  // openai_fields::get_int checks (1.0 is an integer)
    case JsonType::kNumber:
      return v.is_number();
    case JsonType::kString:
      return v.is_string();
    case JsonType::kObject:
      return v.is_object();
    case JsonType::kList:
      return v.is_array();
    case JsonType::kStringOrList:
      return v.is_string() || v.is_array();
    case JsonType::kStringOrObject:
      return v.is_string() || v.is_object();
    case JsonType::kBooleanOrString:
      return v.is_boolean() || v.is_string();
    case JsonType::kAny:
      return true;
  }
  return false;
}

template <class T>
void check_range(const FieldSpec& f, T value) {
  const Range& r = f.range;
  if (!r.message) return;
  const double d = static_cast<double>(value);
  const bool below = r.lo_open ? !(d > r.lo) : !(d >= r.lo);
  const bool above = r.hi_open ? !(d < r.hi) : !(d <= r.hi);
  if (below || (above && !r.above_message))
    fail(fmt::format(fmt::runtime(r.message), value), std::string(f.name));
  if (above) fail(fmt::format(fmt::runtime(r.above_message), value), std::string(f.name));
}

void check_field(const FieldSpec& f, const json& obj) {
  const std::string name(f.name);
  const json& v = obj.at(name);
  if (f.type == JsonType::kInteger) {
    check_range(f, *openai_fields::get_int(obj, name.c_str()));  // throws the type error
  } else if (!type_matches(f.type, v)) {
    std::string_view what = f.type_text.empty() ? default_type_text(f.type) : f.type_text;
    fail(fmt::format("'{}' must be {}, got {}", name, what, type_name(v)), name);
  } else if (f.type == JsonType::kNumber) {
    // JSON has no inf or nan (and 1e999 is refused as it is parsed), but the
    // C++ LLM and `pagoda generate --temperature inf` build the object
    // directly: every front end refuses them, as the Python SamplingParams.
    if (!std::isfinite(v.get<double>()))
      fail(fmt::format("{} must be a finite number, got {}", name, v.get<double>()), name);
    check_range(f, v.get<double>());
  }
  if (f.status == Status::kNotSupportedYet && !(f.accepts && f.accepts(v)))
    fail(fmt::format("'{}' is not supported yet", name), name);
}

}  // namespace

const FieldSpec* RequestModel::find(std::string_view name) const {
  auto it = std::find_if(fields.begin(), fields.end(),
                         [&](const FieldSpec& f) { return f.name == name; });
  return it == fields.end() ? nullptr : &*it;
}

const RequestModel& completion_model() {
  static const RequestModel m =
      build("/v1/completions", {completion_only_fields(), openai_fields_common(), sampling_fields(),
                                not_supported_fields()});
  return m;
}

const RequestModel& chat_model() {
  static const RequestModel m = build(
      "/v1/chat/completions",
      {chat_only_fields(), openai_fields_common(), sampling_fields(), not_supported_fields()});
  return m;
}

const RequestModel& generate_model() {
  static const RequestModel m =
      build("/generate", {generate_only_fields(), sampling_fields(), not_supported_fields()});
  return m;
}

const RequestModel& offline_model() {
  static const RequestModel m =
      build("LLM.generate", {offline_only_fields(), sampling_fields(), not_supported_fields()});
  return m;
}

RequestFields::RequestFields(const json& obj, const RequestModel& model)
    : obj_(obj), model_(model) {
  for (const FieldSpec& f : model.fields) {
    auto it = obj.find(std::string(f.name));
    if (it != obj.end() && !it->is_null()) check_field(f, obj);
  }
  for (const auto& [key, value] : obj.items())
    if (!model.find(key)) unknown_.push_back(key);
  for (const FieldSpec& f : model.fields) {
    if (f.object_keys.empty()) continue;
    auto it = obj.find(std::string(f.name));
    if (it == obj.end() || !it->is_object()) continue;
    for (const auto& [key, value] : it->items())
      if (std::find(f.object_keys.begin(), f.object_keys.end(), key) == f.object_keys.end())
        unknown_.push_back(fmt::format("{}.{}", f.name, key));
  }
}

const FieldSpec& RequestFields::spec(std::string_view name) const {
  const FieldSpec* f = model_.find(name);
  if (!f)
    throw std::logic_error(fmt::format("{} reads '{}', which its request model does not declare",
                                       model_.endpoint, name));
  return *f;
}

bool RequestFields::has(std::string_view name) const { return value(name) != nullptr; }

const json* RequestFields::value(std::string_view name) const {
  spec(name);
  return openai_fields::get(obj_, std::string(name).c_str());
}

namespace {

template <class T>
std::optional<T> default_of(const FieldSpec& f) {
  if (std::holds_alternative<std::monostate>(f.default_value)) return std::nullopt;
  if (const T* v = std::get_if<T>(&f.default_value)) return *v;
  throw std::logic_error(fmt::format("field '{}': default of another type", f.name));
}

void expect_type(const FieldSpec& f, JsonType t) {
  if (f.type != t)
    throw std::logic_error(fmt::format("field '{}' read as another JSON type", f.name));
}

}  // namespace

std::optional<bool> RequestFields::boolean(std::string_view name) const {
  const FieldSpec& f = spec(name);
  expect_type(f, JsonType::kBoolean);
  if (const json* v = value(name)) return v->get<bool>();
  return default_of<bool>(f);
}

std::optional<int64_t> RequestFields::integer(std::string_view name) const {
  const FieldSpec& f = spec(name);
  expect_type(f, JsonType::kInteger);
  if (has(name)) return openai_fields::get_int(obj_, std::string(name).c_str());
  return default_of<int64_t>(f);
}

std::optional<double> RequestFields::number(std::string_view name) const {
  const FieldSpec& f = spec(name);
  expect_type(f, JsonType::kNumber);
  if (const json* v = value(name)) return v->get<double>();
  return default_of<double>(f);
}

std::optional<std::string> RequestFields::string(std::string_view name) const {
  const FieldSpec& f = spec(name);
  expect_type(f, JsonType::kString);
  if (const json* v = value(name)) return v->get<std::string>();
  if (auto d = default_of<std::string_view>(f)) return std::string(*d);
  return std::nullopt;
}

void warn_unknown_fields(const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  const std::string names = fmt::format("{{'{}'}}", fmt::join(unknown, "', '"));
  spdlog::warn("The following fields were present in the request but ignored: {}", names);
}

}  // namespace pagoda::request_model
