#include "server/openai_fields.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace pagoda::openai_fields {

using nlohmann::json;

namespace {
constexpr int64_t kMaxChoices = 128;
}  // namespace

void fail(std::string message, std::string param) {
  throw RequestFieldError{bad_request(std::move(message), std::move(param))};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "value";
  }
}

const json* get(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> get_number(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(fmt::format("'{}' must be a number, got {}", name, type_name(*v)), name);
  return v->get<double>();
}

std::optional<int64_t> get_int(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(fmt::format("'{}' is too large: {}", name, u), name);
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
  }
  fail(fmt::format("'{}' must be an integer, got {}", name, v->is_number() ? v->dump() : type_name(*v)),
       name);
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(fmt::format("'{}' must be a boolean, got {}", name, type_name(*v)), name);
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(fmt::format("'{}' must be a string, got {}", name, type_name(*v)), name);
  return v->get<std::string>();
}

namespace {

void parse_stop(const json& obj, SamplingParams& sp) {
  const json* v = get(obj, "stop");
  if (!v) return;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) sp.stop.push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) fail(fmt::format("'stop' must be a string or a list of strings, got {}", type_name(*v)), "stop");
  for (const json& s : *v) {
    if (!s.is_string()) fail("'stop' must be a string or a list of strings", "stop");
    if (!s.get_ref<const std::string&>().empty()) sp.stop.push_back(s.get<std::string>());
  }
}

void parse_stop_token_ids(const json& obj, const ServingModel& model, SamplingParams& sp) {
  const json* v = get(obj, "stop_token_ids");
  if (!v) return;
  if (!v->is_array()) fail(fmt::format("'stop_token_ids' must be a list of integers, got {}", type_name(*v)), "stop_token_ids");
  int64_t vocab = model.tokenizer ? model.tokenizer->vocab_size() : std::numeric_limits<int32_t>::max();
  for (const json& t : *v) {
    if (!t.is_number_integer()) fail("'stop_token_ids' must be a list of integers", "stop_token_ids");
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      fail(fmt::format("stop_token_ids contains {}, outside the vocabulary [0, {})", id, vocab), "stop_token_ids");
    sp.stop_token_ids.push_back(static_cast<int32_t>(id));
  }
}

void parse_logit_bias(const json& obj, const ServingModel& model, SamplingParams& sp) {
  const json* lb = get(obj, "logit_bias");
  if (!lb) return;
  if (!lb->is_object())
    fail(fmt::format("'logit_bias' must be an object mapping token ids to biases, got {}", type_name(*lb)),
         "logit_bias");
  int64_t vocab = model.tokenizer ? model.tokenizer->vocab_size() : std::numeric_limits<int32_t>::max();
  for (const auto& [key, value] : lb->items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size())
      fail(fmt::format("logit_bias keys must be token ids (integers as strings), got '{}'", key), "logit_bias");
    if (id < 0 || id >= vocab)
      fail(fmt::format("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab), "logit_bias");
    if (!value.is_number())
      fail(fmt::format("logit_bias['{}'] must be a number, got {}", key, type_name(value)), "logit_bias");
    double bias = value.get<double>();
    if (!(bias >= -100.0 && bias <= 100.0))
      fail(fmt::format("logit_bias['{}'] must be in [-100, 100], got {}", key, bias), "logit_bias");
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
}

void check_response_format(const json& obj) {
  const json* rf = get(obj, "response_format");
  if (!rf) return;
  if (!rf->is_object()) fail(fmt::format("'response_format' must be an object, got {}", type_name(*rf)), "response_format");
  auto type = get_string(*rf, "type");
  if (!type) fail("response_format.type is required ('text', 'json_object' or 'json_schema')", "response_format");
  if (*type == "text") return;
  if (*type == "json_object" || *type == "json_schema")
    fail(fmt::format("response_format type '{}' is not supported yet (it needs guided decoding); only 'text'",
                     *type),
         "response_format");
  fail(fmt::format("response_format type must be 'text', 'json_object' or 'json_schema', got '{}'", *type),
       "response_format");
}

}  // namespace

void parse_sampling(const json& obj, const ServingModel& model, SamplingParams& sp) {
  const GenerationConfig& gc = model.generation_config;
  check_response_format(obj);

  // n and best_of: vLLM's limits (n >= 1, best_of >= n); 128 bounds the
  // work one request can ask for.
  int64_t n = get_int(obj, "n").value_or(1);
  if (n < 1) fail(fmt::format("n must be at least 1, got {}.", n), "n");
  if (n > kMaxChoices) fail(fmt::format("n must be at most {}, got {}.", kMaxChoices, n), "n");
  sp.n = static_cast<int>(n);
  if (auto best_of = get_int(obj, "best_of")) {
    if (*best_of < n)
      fail(fmt::format("best_of must be greater than or equal to n, got n={} and best_of={}.", n, *best_of),
           "best_of");
    if (*best_of > kMaxChoices) fail(fmt::format("best_of must be at most {}, got {}.", kMaxChoices, *best_of), "best_of");
    sp.best_of = static_cast<int>(*best_of);
  }
  parse_logit_bias(obj, model, sp);

  // Each range is checked on the number as sent (a double), and the message
  // prints that number: checked after the conversion to float, 1e-300 read
  // as 0 and 1.0000000001 as 1.
  const double temperature = get_number(obj, "temperature").value_or(gc.temperature.value_or(1.0f));
  if (!(temperature >= 0.0)) fail(fmt::format("temperature must be non-negative, got {}.", temperature), "temperature");
  sp.temperature = static_cast<float>(temperature);

  const double top_p = get_number(obj, "top_p").value_or(gc.top_p.value_or(1.0f));
  if (!(top_p > 0.0 && top_p <= 1.0)) fail(fmt::format("top_p must be in (0, 1], got {}.", top_p), "top_p");
  // A top_p below the smallest float keeps only the most likely token, as
  // the smallest float does.
  sp.top_p = std::max(static_cast<float>(top_p), std::numeric_limits<float>::denorm_min());

  int64_t top_k = get_int(obj, "top_k").value_or(gc.top_k.value_or(0));
  if (top_k < -1) fail(fmt::format("top_k must be -1 (disable), or at least 1, got {}.", top_k), "top_k");
  if (top_k > std::numeric_limits<int>::max()) top_k = 0;  // larger than any vocabulary: off
  sp.top_k = static_cast<int>(top_k);

  const double min_p = get_number(obj, "min_p").value_or(0.0);
  if (!(min_p >= 0.0 && min_p <= 1.0)) fail(fmt::format("min_p must be in [0, 1], got {}.", min_p), "min_p");
  sp.min_p = static_cast<float>(min_p);

  if (auto seed = get_int(obj, "seed")) sp.seed = static_cast<uint64_t>(*seed);  // any int64, as vLLM

  const double presence_penalty = get_number(obj, "presence_penalty").value_or(0.0);
  if (!(presence_penalty >= -2.0 && presence_penalty <= 2.0))
    fail(fmt::format("presence_penalty must be in [-2, 2], got {}.", presence_penalty), "presence_penalty");
  sp.presence_penalty = static_cast<float>(presence_penalty);
  const double frequency_penalty = get_number(obj, "frequency_penalty").value_or(0.0);
  if (!(frequency_penalty >= -2.0 && frequency_penalty <= 2.0))
    fail(fmt::format("frequency_penalty must be in [-2, 2], got {}.", frequency_penalty), "frequency_penalty");
  sp.frequency_penalty = static_cast<float>(frequency_penalty);
  const double repetition_penalty =
      get_number(obj, "repetition_penalty").value_or(gc.repetition_penalty.value_or(1.0f));
  if (!(repetition_penalty > 0.0))
    fail(fmt::format("repetition_penalty must be greater than zero, got {}.", repetition_penalty), "repetition_penalty");
  if (!(repetition_penalty <= std::numeric_limits<float>::max()))
    fail(fmt::format("repetition_penalty must be at most {} (a float), got {}.", std::numeric_limits<float>::max(),
                     repetition_penalty),
         "repetition_penalty");
  sp.repetition_penalty = std::max(static_cast<float>(repetition_penalty), std::numeric_limits<float>::denorm_min());

  parse_stop(obj, sp);
  parse_stop_token_ids(obj, model, sp);
  sp.ignore_eos = get_bool(obj, "ignore_eos").value_or(false);
  sp.min_tokens = get_int(obj, "min_tokens").value_or(0);
  if (sp.min_tokens < 0) fail(fmt::format("min_tokens must be non-negative, got {}.", sp.min_tokens), "min_tokens");
  sp.skip_special_tokens = get_bool(obj, "skip_special_tokens").value_or(true);
  sp.spaces_between_special_tokens = get_bool(obj, "spaces_between_special_tokens").value_or(true);
  sp.include_stop_str_in_output = get_bool(obj, "include_stop_str_in_output").value_or(false);
  get_string(obj, "user");  // accepted and ignored, but must be a string
}

std::string check_model(const json& obj, const ServingModel& model) {
  auto name = get_string(obj, "model");
  if (name && *name != model.served_model_name)
    throw RequestFieldError{not_found(fmt::format("The model `{}` does not exist.", *name), "model")};
  return model.served_model_name;
}

int64_t resolve_max_tokens(std::optional<int64_t> requested, int64_t prompt_len,
                           int64_t max_model_len, const char* what, const char* param) {
  if (requested && *requested < 1)
    fail(fmt::format("max_tokens must be at least 1, got {}.", *requested), param);
  if (prompt_len >= max_model_len)
    fail(fmt::format("This model's maximum context length is {} tokens. However, your request has {} "
                     "input tokens. Please reduce the length of the input {}.",
                     max_model_len, prompt_len, what),
         what);
  if (!requested) return max_model_len - prompt_len;
  if (*requested > max_model_len - prompt_len) {
    int64_t total = *requested > std::numeric_limits<int64_t>::max() - prompt_len
                        ? std::numeric_limits<int64_t>::max()
                        : prompt_len + *requested;
    fail(fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                     "({} in the {}, {} in the completion). Please reduce the length of the {} or completion.",
                     max_model_len, total, prompt_len, what, *requested, what),
         param);
  }
  return *requested;
}

}  // namespace pagoda::openai_fields
