#include "server/openai_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "server/bad_words.h"
#include "server/guided_fields.h"
#include "server/request_model.h"
#include "server/sampling_checks.h"

namespace pagoda::openai_fields {

using nlohmann::json;

void fail(std::string message, std::string param) {
  throw RequestFieldError{bad_request(std::move(message), std::move(param))};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "value";
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
  if (!v->is_number())
    fail(fmt::format("'{}' must be a number, got {}", name, type_name(*v)), name);
  return v->get<double>();
}

std::optional<int64_t> get_int(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(fmt::format("'{}' is out of range: {} (integers up to {} are accepted)", name, u,
                       std::numeric_limits<int64_t>::max()),
           name);
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
    // An integer literal beyond 64 bits (the parser keeps it as a double).
    if (std::isfinite(d) && d == std::floor(d))
      fail(fmt::format("'{}' is out of range: {} (integers from {} to {} are accepted)", name,
                       v->dump(), std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max()),
           name);
  }
  fail(fmt::format("'{}' must be an integer, got {}", name,
                   v->is_number() ? v->dump() : type_name(*v)),
       name);
}

std::optional<int64_t> as_integer(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    fail(fmt::format("'{}' must be a boolean, got {}", name, type_name(*v)), name);
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& obj, const char* name) {
  const json* v = get(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    fail(fmt::format("'{}' must be a string, got {}", name, type_name(*v)), name);
  return v->get<std::string>();
}

namespace {

using request_model::RequestFields;

void parse_stop(const RequestFields& f, SamplingParams& sp) {
  const json* v = f.value("stop");
  if (!v) return;
  // vLLM's SamplingParams: "stop cannot contain an empty string."
  if (v->is_string()) {
    if (v->get_ref<const std::string&>().empty())
      fail("stop cannot contain an empty string.", "stop");
    sp.stop.push_back(v->get<std::string>());
    return;
  }
  for (const json& s : *v) {
    if (!s.is_string()) fail("'stop' must be a string or a list of strings", "stop");
    if (s.get_ref<const std::string&>().empty())
      fail("stop cannot contain an empty string.", "stop");
    sp.stop.push_back(s.get<std::string>());
  }
}

// The vocabulary token ids are checked against: the model's, or with no
// model (Vocab{}: SamplingParams' own checks) only that ids are >= 0 and
// fit an int32.
struct Vocab {
  std::optional<int64_t> size;
  bool contains(int64_t id) const {
    return id >= 0 && id < size.value_or(std::numeric_limits<int32_t>::max());
  }
  std::string range() const {
    return size ? fmt::format("[0, {})", *size) : std::string("[0, vocab_size)");
  }
};

Vocab vocab_of(const ServingModel& model) {
  return {model.tokenizer ? std::optional<int64_t>(model.tokenizer->vocab_size())
                          : std::optional<int64_t>(std::numeric_limits<int32_t>::max())};
}

void parse_stop_token_ids(const RequestFields& f, const Vocab& vocab, SamplingParams& sp) {
  const json* v = f.value("stop_token_ids");
  if (!v) return;
  for (const json& t : *v) {
    const std::optional<int64_t> i = as_integer(t);
    if (!i) fail("'stop_token_ids' must be a list of integers", "stop_token_ids");
    const int64_t id = *i;
    if (!vocab.contains(id))
      fail(fmt::format("stop_token_ids contains {}, outside the vocabulary {}", id, vocab.range()),
           "stop_token_ids");
    sp.stop_token_ids.push_back(static_cast<int32_t>(id));
  }
}

// vLLM's Processor._validate_allowed_token_ids: a list, not empty, every id
// in the vocabulary.
void parse_allowed_token_ids(const RequestFields& f, const Vocab& vocab, SamplingParams& sp) {
  const json* v = f.value("allowed_token_ids");
  if (!v) return;
  if (v->empty()) fail("allowed_token_ids is not None and empty!", "allowed_token_ids");
  for (const json& t : *v) {
    const std::optional<int64_t> i = as_integer(t);
    if (!i) fail("'allowed_token_ids' must be a list of integers", "allowed_token_ids");
    const int64_t id = *i;
    if (!vocab.contains(id))
      fail("allowed_token_ids contains out-of-vocab token id!", "allowed_token_ids");
    sp.allowed_token_ids.push_back(static_cast<int32_t>(id));
  }
}

// The words (strings, bounded in size); their token ids need the model
// (tokenize_bad_words).
void parse_bad_words(const RequestFields& f, SamplingParams& sp) {
  const json* v = f.value("bad_words");
  if (!v) return;
  // Bounded before it is tokenized (issue 12): 256 KiB of words in all
  // (vLLM has no bound; real lists are a few words).
  constexpr size_t kMaxBadWordsBytes = size_t{256} << 10;
  size_t bytes = 0;
  for (const json& w : *v) {
    if (!w.is_string()) fail("'bad_words' must be a list of strings", "bad_words");
    bytes += w.get_ref<const std::string&>().size();
    if (bytes > kMaxBadWordsBytes)
      fail(fmt::format("bad_words holds more than {} KiB of text", kMaxBadWordsBytes >> 10),
           "bad_words");
    sp.bad_words.push_back(w.get<std::string>());
  }
}

void tokenize_bad_words(const ServingModel& model, SamplingParams& sp) {
  if (!sp.bad_words.empty() && model.tokenizer) {
    // A word of max_model_len tokens or more can never be generated (the
    // output is shorter than the context), so it is not tokenized: what it
    // does is what vLLM's does with it, nothing.
    std::vector<std::string> can_match;
    for (const std::string& w : sp.bad_words)
      if (model.max_model_len <= 0 ||
          static_cast<int64_t>(model.tokenizer->min_token_count(w)) < model.max_model_len)
        can_match.push_back(w);
    try {
      sp.bad_words_token_ids = bad_words_token_ids(*model.tokenizer, can_match);
    } catch (const std::invalid_argument& e) {
      fail(e.what(), "bad_words");
    }
  }
}

void parse_logit_bias(const RequestFields& f, const Vocab& vocab, SamplingParams& sp) {
  const json* lb = f.value("logit_bias");
  if (!lb) return;
  for (const auto& [key, value] : lb->items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size())
      fail(fmt::format("logit_bias keys must be token ids (integers as strings), got '{}'", key),
           "logit_bias");
    if (!vocab.contains(id))
      fail(fmt::format("logit_bias token id {} is outside the vocabulary {}", id, vocab.range()),
           "logit_bias");
    if (!value.is_number())
      fail(fmt::format("logit_bias['{}'] must be a number, got {}", key, type_name(value)),
           "logit_bias");
    double bias = value.get<double>();
    if (!(bias >= -100.0 && bias <= 100.0))
      fail(fmt::format("logit_bias['{}'] must be in [-100, 100], got {}", key, bias), "logit_bias");
    // Two spellings of one id ("13", "013"): vLLM's {int(k): v} keeps the
    // last in the document, which this parser's key order cannot tell, so
    // it is an error rather than a sum past the ±100 bound.
    for (const auto& [seen, b] : sp.logit_bias)
      if (seen == id)
        fail(fmt::format("logit_bias names token id {} more than once ('{}')", id, key),
             "logit_bias");
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
}

// What parse_sampling and parse_sampling_without_model convert alike: `gc`
// supplies temperature, top_p, top_k, min_p and repetition_penalty when unset;
// token ids are checked against `vocab`.
void convert_sampling(const RequestFields& f, const GenerationConfig& gc, const Vocab& vocab,
                      SamplingParams& sp) {
  // n and best_of: vLLM's limits (n >= 1, best_of >= n); the ranges (n <=
  // 128, best_of <= 128) are checked by the request model.
  const int64_t n = *f.integer("n");
  sp.n = static_cast<int>(n);
  const std::optional<int64_t> best_of = f.integer("best_of");
  check_best_of(n, best_of);
  if (best_of) sp.best_of = static_cast<int>(*best_of);
  parse_logit_bias(f, vocab, sp);

  // Ranges were checked on the number as sent (request_model.cpp): checked
  // after the conversion to float, 1e-300 would read as 0 and 1.0000000001
  // as 1.
  // A temperature past the largest float (1e308 is a valid JSON number, and
  // vLLM takes it) samples as the largest float, not as inf: logits / inf
  // would turn a masked -inf logit into nan.
  sp.temperature =
      static_cast<float>(std::min(f.number("temperature").value_or(gc.temperature.value_or(1.0f)),
                                  static_cast<double>(std::numeric_limits<float>::max())));
  // A top_p below the smallest float keeps only the most likely token, as
  // the smallest float does.
  sp.top_p = std::max(static_cast<float>(f.number("top_p").value_or(gc.top_p.value_or(1.0f))),
                      std::numeric_limits<float>::denorm_min());
  int64_t top_k = f.integer("top_k").value_or(gc.top_k.value_or(0));
  if (top_k > std::numeric_limits<int>::max()) top_k = 0;  // larger than any vocabulary: off
  sp.top_k = static_cast<int>(top_k);
  sp.min_p = static_cast<float>(f.number("min_p").value_or(gc.min_p.value_or(0.0f)));
  if (auto seed = f.integer("seed")) sp.seed = static_cast<uint64_t>(*seed);  // any int64, as vLLM
  sp.presence_penalty = static_cast<float>(*f.number("presence_penalty"));
  sp.frequency_penalty = static_cast<float>(*f.number("frequency_penalty"));
  sp.repetition_penalty =
      std::max(static_cast<float>(
                   f.number("repetition_penalty").value_or(gc.repetition_penalty.value_or(1.0f))),
               std::numeric_limits<float>::denorm_min());

  parse_stop(f, sp);
  parse_stop_token_ids(f, vocab, sp);
  sp.ignore_eos = *f.boolean("ignore_eos");
  sp.min_tokens = *f.integer("min_tokens");
  sp.skip_special_tokens = *f.boolean("skip_special_tokens");
  sp.spaces_between_special_tokens = *f.boolean("spaces_between_special_tokens");
  sp.include_stop_str_in_output = *f.boolean("include_stop_str_in_output");
  parse_allowed_token_ids(f, vocab, sp);
  parse_bad_words(f, sp);
  if (auto k = f.integer("prompt_logprobs")) sp.prompt_logprobs = static_cast<int>(*k);
}

}  // namespace

void parse_sampling(const RequestFields& f, const ServingModel& model, SamplingParams& sp) {
  convert_sampling(f, model.generation_config, vocab_of(model), sp);
  tokenize_bad_words(model, sp);
  parse_guided(f, model, sp);
}

SamplingParams parse_sampling_without_model(const RequestFields& f) {
  // Values that pass the checks across fields where the model would decide
  // (generation_config.json): with beam search, greedy; without, not.
  GenerationConfig neutral;
  neutral.temperature = *f.boolean("use_beam_search") ? 0.0f : 1.0f;
  SamplingParams sp;
  convert_sampling(f, neutral, Vocab{}, sp);
  if (auto lp = f.integer("logprobs")) sp.logprobs = static_cast<int>(*lp);
  return sp;
}

std::string check_model(const json& obj, const ServingModel& model) {
  auto name = get_string(obj, "model");
  if (name && *name != model.served_model_name)
    throw RequestFieldError{
        not_found(fmt::format("The model `{}` does not exist.", *name), "model")};
  return model.served_model_name;
}

int64_t resolve_max_tokens(std::optional<int64_t> requested, int64_t prompt_len,
                           int64_t max_model_len, const char* what, const char* param,
                           ContextOverflow overflow) {
  if (requested && *requested < 1)
    fail(fmt::format("max_tokens must be at least 1, got {}.", *requested), param);
  if (prompt_len >= max_model_len)
    fail(fmt::format(
             "This model's maximum context length is {} tokens. However, your request has {} "
             "input tokens. Please reduce the length of the input {}.",
             max_model_len, prompt_len, what),
         what);
  if (!requested) return max_model_len - prompt_len;
  if (*requested > max_model_len - prompt_len) {
    if (overflow == ContextOverflow::kCap) return max_model_len - prompt_len;
    int64_t total = *requested > std::numeric_limits<int64_t>::max() - prompt_len
                        ? std::numeric_limits<int64_t>::max()
                        : prompt_len + *requested;
    fail(fmt::format(
             "This model's maximum context length is {} tokens. However, you requested {} tokens "
             "({} in the {}, {} in the completion). Please reduce the length of the {} or "
             "completion.",
             max_model_len, total, prompt_len, what, *requested, what),
         param);
  }
  return *requested;
}

}  // namespace pagoda::openai_fields
