// The declared request models of the generation endpoints, after vLLM's
// CompletionRequest and ChatCompletionRequest
// (vllm/entrypoints/openai/protocol.py) and the SamplingParams keywords
// vLLM's api_server /generate takes: every field once, with its JSON type,
// default, range and status. RequestFields checks a body against one model
// before anything is converted (JSON types, ranges, fields not supported
// yet) and lists the keys the model does not declare; the conversion
// (server/openai_request.cpp) reads fields only through RequestFields, which
// refuses an undeclared name (std::logic_error: a programming error), so an
// unknown or unsupported field is known by construction.
//
// Status, as vLLM treats each field:
//   kConverted        read into SamplingParams / ParsedRequest.
//   kNotSupportedYet  400 "'X' is not supported yet" (param X) when present
//                     with a value other than its default (`accepts`).
//   kIgnored          accepted and type-checked, has no effect, as in vLLM
//                     (e.g. `user`; the note says why).
// Keys no model declares (top-level, or inside a declared nested model such
// as stream_options: "stream_options.<key>") are logged once per request with
// spdlog warn, in vLLM's words ("The following fields were present in the
// request but ignored: {...}"), and listed in ParsedRequest::ignored_fields.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pagoda::request_model {

enum class JsonType {
  kBoolean,
  kInteger,  // integral numbers, 1.0 included (as pydantic's int)
  kNumber,
  kString,
  kObject,
  kList,
  kStringOrList,
  kStringOrObject,
  kBooleanOrString,
  kAny,
};

enum class Status { kConverted, kNotSupportedYet, kIgnored };

// Inclusive unless open; checked on the number as sent (a double, or the
// int64 for kInteger). message / above_message: fmt strings with {} for the
// value (above_message: the upper bound's, when it differs).
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
  const char* message = nullptr;  // nullptr: no range
  const char* above_message = nullptr;
};

// The value a field has when absent or null. monostate: unset (None in
// vLLM; the conversion decides, e.g. from generation_config.json).
using Default = std::variant<std::monostate, bool, int64_t, double, std::string_view>;

struct FieldSpec {
  std::string_view name;
  JsonType type = JsonType::kAny;
  Status status = Status::kConverted;
  Default default_value{};
  Range range{};
  // "must be <type_text>" in the type error; empty: from `type`.
  std::string_view type_text{};
  // kNotSupportedYet: whether a present value is still the default (accepted,
  // e.g. use_beam_search false). nullptr: any present value is refused.
  bool (*accepts)(const nlohmann::json&) = nullptr;
  std::string_view note{};  // what it does, or why it does nothing
  // kObject fields that are a pydantic model in vLLM (StreamOptions,
  // ResponseFormat): the keys it declares. Other keys inside are unknown,
  // listed as "<field>.<key>" (vLLM's OpenAIBaseModel logs the extras of
  // nested models too). Empty: a free-form object (logit_bias, ...).
  std::vector<std::string_view> object_keys{};
};

struct RequestModel {
  std::string_view endpoint;  // "/v1/completions", ...
  std::vector<FieldSpec> fields;
  const FieldSpec* find(std::string_view name) const;
};

const RequestModel& completion_model();
const RequestModel& chat_model();
const RequestModel& generate_model();
// Offline generation (the C++/Python LLM class, `pagoda generate`'s JSON
// lines): one prompt (prompt, prompt_token_ids or messages, as vLLM's
// TextPrompt / TokensPrompt / LLM.chat take them), vLLM's SamplingParams
// keywords (the sampling group, max_tokens default 16 and logprobs k, as
// vllm/sampling_params.py) and LLM.chat's template options. Offline callers
// refuse the keys it does not declare (vLLM's SamplingParams(**kwargs)
// raises on an unknown keyword).
const RequestModel& offline_model();

// A request body checked against a model. The constructor throws
// openai_fields::RequestFieldError (a 400 naming the field) for: a wrong
// JSON type ("'temperature' must be a number, got string"), a number out of
// range (the field's message), a not-supported-yet field with a non-default
// value ("'guided_json' is not supported yet"). Fields are checked in the
// model's order. obj must outlive this.
class RequestFields {
 public:
  RequestFields(const nlohmann::json& obj, const RequestModel& model);

  // Keys of the body the model does not declare, in the body's order, then
  // undeclared keys of nested models as "<field>.<key>".
  const std::vector<std::string>& unknown() const { return unknown_; }
  const nlohmann::json& body() const { return obj_; }

  // Whether the field was sent (present and not null).
  bool has(std::string_view name) const;
  // Typed reads: the value sent, else the table default (nullopt when that
  // is unset). A name the model does not declare, or a read of the wrong
  // type: std::logic_error.
  std::optional<bool> boolean(std::string_view name) const;
  std::optional<int64_t> integer(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;
  std::optional<std::string> string(std::string_view name) const;
  // The raw value sent (lists, objects, unions); nullptr when absent or null.
  const nlohmann::json* value(std::string_view name) const;
  // Whether the request model declares the field (endpoints differ).
  bool declares(std::string_view name) const { return model_.find(name) != nullptr; }

 private:
  const FieldSpec& spec(std::string_view name) const;

  const nlohmann::json& obj_;
  const RequestModel& model_;
  std::vector<std::string> unknown_;
};

// vLLM's warning for the unknown keys of one request (nothing when none).
void warn_unknown_fields(const std::vector<std::string>& unknown);

}  // namespace pagoda::request_model
