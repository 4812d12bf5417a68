// Typed access to an OpenAI request's JSON fields, and the parts the
// completion and chat endpoints share (sampling fields, unsupported-field
// checks, the context-length check). Failures throw RequestFieldError, which
// the endpoint parsers turn into their OpenAIError result.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sample/sampling_params.h"
#include "server/openai_error.h"
#include "server/serving_model.h"

namespace pagoda::request_model {
class RequestFields;
}

namespace pagoda::openai_fields {

struct RequestFieldError {
  OpenAIError error;
};
[[noreturn]] void fail(std::string message, std::string param = "");

// Each returns nullopt when the field is absent or null, and throws a 400
// naming the field ("'temperature' must be a number, got string") when it
// has the wrong JSON type. Integers accept integral numbers (1.0).
std::optional<double> get_number(const nlohmann::json& obj, const char* name);
std::optional<int64_t> get_int(const nlohmann::json& obj, const char* name);
std::optional<bool> get_bool(const nlohmann::json& obj, const char* name);
std::optional<std::string> get_string(const nlohmann::json& obj, const char* name);
// An integer as pydantic's lax int takes it: a JSON integer, or a float
// with no fractional part (2.0), within int64; nullopt otherwise (the
// caller names the field). For list items (token ids).
std::optional<int64_t> as_integer(const nlohmann::json& v);
// Field present and not null.
const nlohmann::json* get(const nlohmann::json& obj, const char* name);

// The SamplingParams fields every generation endpoint shares (request_model's
// sampling group: n, best_of, temperature, top_p, top_k, min_p, seed, the
// penalties, stop, stop_token_ids, ignore_eos, min_tokens,
// skip_special_tokens, spaces_between_special_tokens,
// include_stop_str_in_output, logit_bias, allowed_token_ids, bad_words (+
// their token ids), prompt_logprobs, and guided decoding with
// response_format where the endpoint has it: server/guided_fields.h), from fields already checked
// against their model. generation_config.json supplies temperature/top_p/top_k/min_p/
// repetition_penalty when the request leaves them out. max_tokens is not set here (see
// resolve_max_tokens; generation_config.json's max_new_tokens: openai_request.cpp).
void parse_sampling(const request_model::RequestFields& fields, const ServingModel& model,
                    SamplingParams& sp);

// parse_sampling without a model, by the same code (vLLM's
// SamplingParams(...) checks these at construction): the fields as sent,
// each checked as parse_sampling checks it (best_of >= n; stop without an
// empty string; logit_bias keys token ids >= 0, values numbers in [-100,
// 100], each id once; stop_token_ids and allowed_token_ids integers >= 0,
// allowed not empty; bad_words strings within the size bound) plus the
// integer logprobs (offline_model's). What the model would supply (an unset
// temperature, top_p, top_k, min_p or repetition_penalty: generation_config.json's)
// takes a value that passes check_sampling_cross_fields (sampling_checks.h):
// temperature 0 with use_beam_search, else 1. Token ids against the
// vocabulary, bad_words' tokens, guided decoding and the context wait for
// the model. Throws RequestFieldError naming the field.
SamplingParams parse_sampling_without_model(const request_model::RequestFields& fields);

// Checks the model name: absent → the served one; another → 404
// "The model `x` does not exist.".
std::string check_model(const nlohmann::json& obj, const ServingModel& model);

// What a front end does with prompt_len + max_tokens > max_model_len (a
// prompt of max_model_len tokens or more is refused by both).
enum class ContextOverflow {
  kRefuse,  // vLLM's OpenAI server: 400 "maximum context length is ... you requested ..."
  kCap,     // vLLM's offline LLM: generation stops at max_model_len (finish_reason "length")
};

// Validates requested max_tokens (≥ 1) against the context: with it unset,
// max_model_len − prompt_len; prompt_len + max_tokens > max_model_len → 400
// with vLLM's message stating both numbers (kRefuse) or max_model_len −
// prompt_len (kCap). `what` is "messages" (chat) or "prompt" (completions)
// for the message text.
int64_t resolve_max_tokens(std::optional<int64_t> requested, int64_t prompt_len,
                           int64_t max_model_len, const char* what, const char* param,
                           ContextOverflow overflow = ContextOverflow::kRefuse);

// JSON type name for messages ("string", "array", ...).
const char* type_name(const nlohmann::json& v);

}  // namespace pagoda::openai_fields
