// Protocol layer, request side: JSON body → ParsedRequest or OpenAI error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>

#include "engine/chat/chat_template.h"
#include "server/openai_request.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_protocol::make_test_model;

ParsedRequest ok_completion(const std::string& body, const ServingModel& m = make_test_model()) {
  ParseResult r = parse_completion_request(body, m);
  if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
  return std::get<ParsedRequest>(r);
}

OpenAIError err_completion(const std::string& body, const ServingModel& m = make_test_model()) {
  ParseResult r = parse_completion_request(body, m);
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r)) << "expected an error for " << body;
  if (!std::holds_alternative<OpenAIError>(r)) return {};
  return std::get<OpenAIError>(r);
}

OpenAIError err_chat(const std::string& body, const ServingModel& m = make_test_model()) {
  ParseResult r = parse_chat_request(body, m);
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r)) << "expected an error for " << body;
  if (!std::holds_alternative<OpenAIError>(r)) return {};
  return std::get<OpenAIError>(r);
}

TEST(ProtocolCompletion, StringPromptGetsBosAndDefaults) {
  ParsedRequest r = ok_completion(R"({"model": "tiny", "prompt": "Hi"})");
  EXPECT_EQ(r.kind, ApiKind::kCompletion);
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{1, 'H' + 3, 'i' + 3}));
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.request_id.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(r.request_id.size(), 5u + 32u);
  EXPECT_GT(r.created, 1600000000);
  EXPECT_FALSE(r.stream);
  // max_tokens unset → 16 (vLLM's CompletionRequest / OpenAI's default).
  EXPECT_EQ(r.sampling.max_tokens.value(), 16);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_TRUE(r.sampling.skip_special_tokens);
  EXPECT_NE(ok_completion(R"({"prompt": "Hi"})").request_id, r.request_id);
}

TEST(ProtocolCompletion, TokenIdPromptsAreUsedAsGiven) {
  EXPECT_EQ(ok_completion(R"({"prompt": [5, 6, 7], "max_tokens": 4})").prompt_token_ids,
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(ok_completion(R"({"prompt": [[5, 6]]})").prompt_token_ids,
            (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ok_completion(R"({"prompt": ["A"]})").prompt_token_ids,
            (std::vector<int32_t>{1, 'A' + 3}));
  EXPECT_EQ(ok_completion(R"({"prompt": "A", "add_special_tokens": false})").prompt_token_ids,
            (std::vector<int32_t>{'A' + 3}));
}

TEST(ProtocolCompletion, SamplingFieldsAreCopied) {
  ParsedRequest r =
      ok_completion(R"({"prompt": "x", "max_tokens": 7, "temperature": 0, "top_p": 0.5,
      "top_k": 20, "min_p": 0.1, "seed": 42, "stop": ["a", "bc"], "stop_token_ids": [9],
      "ignore_eos": true, "min_tokens": 3, "n": 1, "stream": true, "stream_options": {"include_usage": true},
      "user": "u1", "skip_special_tokens": false, "include_stop_str_in_output": true,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2,
      "some_unknown_field": {"ignored": true}})");
  const SamplingParams& sp = r.sampling;
  EXPECT_EQ(sp.max_tokens.value(), 7);
  EXPECT_TRUE(sp.greedy());
  EXPECT_FLOAT_EQ(sp.top_p, 0.5f);
  EXPECT_EQ(sp.top_k, 20);
  EXPECT_FLOAT_EQ(sp.min_p, 0.1f);
  EXPECT_EQ(sp.seed.value(), 42u);
  EXPECT_EQ(sp.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(sp.stop_token_ids, (std::vector<int32_t>{9}));
  EXPECT_TRUE(sp.ignore_eos);
  EXPECT_EQ(sp.min_tokens, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(sp.skip_special_tokens);
  EXPECT_TRUE(sp.include_stop_str_in_output);
  EXPECT_FLOAT_EQ(sp.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(sp.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(sp.repetition_penalty, 1.2f);
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "stop": "END"})").sampling.stop,
            (std::vector<std::string>{"END"}));
}

TEST(ProtocolCompletion, GenerationConfigSuppliesDefaultsTheRequestOmits) {
  ServingModel m = make_test_model();
  m.generation_config.temperature = 0.6f;
  m.generation_config.top_p = 0.9f;
  m.generation_config.top_k = 50;
  m.generation_config.repetition_penalty = 1.1f;
  ParsedRequest r = ok_completion(R"({"prompt": "x"})", m);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 50);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  ParsedRequest r2 = ok_completion(R"({"prompt": "x", "temperature": 0, "top_k": -1})", m);
  EXPECT_FLOAT_EQ(r2.sampling.temperature, 0.0f);
  EXPECT_EQ(r2.sampling.top_k, -1);
}

// generation_config.json's min_p and max_new_tokens (vLLM's
// get_diff_sampling_param: max_new_tokens is the default max_tokens). min_p
// fills an unset min_p everywhere; max_new_tokens is the max_tokens of a
// chat request that sets none (capped by the room in the context, as vLLM's
// get_max_tokens takes the smallest), while a request's own max_tokens wins,
// even a larger one. Completions keep vLLM CompletionRequest's default 16.
TEST(ProtocolCompletion, GenerationConfigMinPAndMaxNewTokens) {
  ServingModel m = make_test_model();
  m.generation_config.min_p = 0.05f;
  m.generation_config.max_new_tokens = 5;
  EXPECT_FLOAT_EQ(ok_completion(R"({"prompt": "x"})", m).sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(ok_completion(R"({"prompt": "x", "min_p": 0})", m).sampling.min_p, 0.0f);
  EXPECT_EQ(ok_completion(R"({"prompt": "x"})", m).prompts[0].max_tokens, 16);
  auto chat = [&](const std::string& body) {
    ParseResult r = parse_chat_request(body, m);
    if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
    return std::get<ParsedRequest>(r);
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  ParsedRequest c = chat("{" + msgs + "}");
  EXPECT_EQ(c.prompts[0].max_tokens, 5);
  EXPECT_FLOAT_EQ(c.sampling.min_p, 0.05f);
  EXPECT_EQ(chat("{" + msgs + R"(, "max_tokens": 9})").prompts[0].max_tokens, 9);
  EXPECT_EQ(chat("{" + msgs + R"(, "max_completion_tokens": 3})").prompts[0].max_tokens, 3);
  // Larger than the room left (max_model_len 64): the room.
  m.generation_config.max_new_tokens = 1000;
  ParsedRequest big = chat("{" + msgs + "}");
  EXPECT_EQ(big.prompts[0].max_tokens,
            m.max_model_len - static_cast<int64_t>(big.prompts[0].token_ids.size()));
  // Offline (LLM.generate without SamplingParams, `pagoda generate`): vLLM's
  // get_default_sampling_params takes max_new_tokens for max_tokens.
  m.generation_config.max_new_tokens = 7;
  auto offline = [&](const char* body) {
    ParseResult r = parse_offline_object(json::parse(body), m);
    if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
    return std::get<ParsedRequest>(r);
  };
  EXPECT_EQ(offline(R"({"prompt": "x"})").prompts[0].max_tokens, 7);
  EXPECT_FLOAT_EQ(offline(R"({"prompt": "x"})").sampling.min_p, 0.05f);
  EXPECT_EQ(offline(R"({"prompt": "x", "max_tokens": 20})").prompts[0].max_tokens, 20);
  // Without them: min_p 0, chat's max_tokens the room.
  ServingModel plain = make_test_model();
  EXPECT_FLOAT_EQ(ok_completion(R"({"prompt": "x"})", plain).sampling.min_p, 0.0f);
}

// A top_p (or repetition_penalty) in range but below the smallest float is
// accepted, as vLLM accepts it, and becomes the smallest positive float (the
// nucleus keeps only the most likely token either way), not 0.
TEST(ProtocolCompletion, TinyPositiveTopPIsAcceptedNotReadAsZero) {
  ParsedRequest r =
      ok_completion(R"({"prompt": "x", "top_p": 1e-300, "repetition_penalty": 1e-300})");
  EXPECT_GT(r.sampling.top_p, 0.0f);
  EXPECT_EQ(r.sampling.top_p, std::numeric_limits<float>::denorm_min());
  EXPECT_GT(r.sampling.repetition_penalty, 0.0f);
}

struct ErrorCase {
  const char* body;
  int status;
  const char* type;
  const char* param;  // "" = null
  const char* message_part;
};

TEST(ProtocolCompletion, EachBadInputGetsItsStatusTypeAndParam) {
  const ErrorCase cases[] = {
      {R"({"prompt": "x",)", 400, "BadRequestError", "", "not valid JSON"},
      {R"([1, 2])", 400, "BadRequestError", "", "must be a JSON object"},
      {R"({"max_tokens": 3})", 400, "BadRequestError", "prompt", "'prompt' is required"},
      {R"({"prompt": 5})", 400, "BadRequestError", "prompt",
       "must be a string, a list of strings, a list of token ids"},
      {R"({"prompt": []})", 400, "BadRequestError", "prompt", "must not be empty"},
      {R"({"prompt": "", "add_special_tokens": false})", 400, "BadRequestError", "prompt",
       "The prompt is empty"},
      {R"({"prompt": [1, "a"]})", 400, "BadRequestError", "prompt", "list of token ids"},
      {R"({"prompt": [1, 259]})", 400, "BadRequestError", "prompt",
       "Token id 259 is out of vocabulary"},
      {R"({"prompt": [-1]})", 400, "BadRequestError", "prompt", "Token id -1"},
      {R"({"prompt": ["a", 1]})", 400, "BadRequestError", "prompt",
       "only strings or only token-id lists"},
      // Mixed text and token-id lists: none of vLLM's prompt types.
      {R"({"prompt": [[1, 2], "a"]})", 400, "BadRequestError", "prompt",
       "only strings or only token-id lists"},
      {R"({"prompt": ["a", [1, 2]]})", 400, "BadRequestError", "prompt",
       "only strings or only token-id lists"},
      {R"({"prompt": [1.5, 2]})", 400, "BadRequestError", "prompt", "found a 1.5 in the list"},
      {R"({"prompt": "x", "stop_token_ids": [2.5]})", 400, "BadRequestError", "stop_token_ids",
       "list of integers"},
      {R"({"prompt": [[1], []]})", 400, "BadRequestError", "prompt", "must not be empty"},
      {R"({"prompt": [[1], [1, 300]]})", 400, "BadRequestError", "prompt",
       "Token id 300 is out of vocabulary"},
      {R"({"prompt": "x", "model": "gpt-4"})", 404, "NotFoundError", "model",
       "The model `gpt-4` does not exist."},
      {R"({"prompt": "x", "model": 3})", 400, "BadRequestError", "model",
       "'model' must be a string"},
      {R"({"prompt": "x", "max_tokens": 0})", 400, "BadRequestError", "max_tokens",
       "at least 1, got 0"},
      {R"({"prompt": "x", "max_tokens": -5})", 400, "BadRequestError", "max_tokens",
       "at least 1, got -5"},
      {R"({"prompt": "x", "max_tokens": "5"})", 400, "BadRequestError", "max_tokens",
       "must be an integer"},
      {R"({"prompt": "x", "max_tokens": 2.5})", 400, "BadRequestError", "max_tokens",
       "must be an integer"},
      {R"({"prompt": "x", "max_tokens": 63})", 400, "BadRequestError", "max_tokens",
       "maximum context length is 64 tokens. However, you requested 65 tokens (2 in the prompt, 63 "
       "in the completion)"},
      {R"({"prompt": "x", "max_tokens": 9223372036854775807})", 400, "BadRequestError",
       "max_tokens", "maximum context length is 64 tokens"},
      {R"({"prompt": [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
                      5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]})",
       400, "BadRequestError", "prompt", "your request has 64 input tokens"},
      {R"({"prompt": "x", "temperature": -0.1})", 400, "BadRequestError", "temperature",
       "non-negative"},
      {R"({"prompt": "x", "temperature": "hot"})", 400, "BadRequestError", "temperature",
       "must be a number, got string"},
      {R"({"prompt": "x", "top_p": 0})", 400, "BadRequestError", "top_p", "(0, 1]"},
      {R"({"prompt": "x", "top_p": 1.5})", 400, "BadRequestError", "top_p", "(0, 1]"},
      // Ranges are checked, and the value printed, as sent: as floats,
      // -1e-300 read as -0 and 1.0000000001 as 1 (accepted).
      {R"({"prompt": "x", "top_p": -1e-300})", 400, "BadRequestError", "top_p",
       "top_p must be in (0, 1], got -1e-300."},
      {R"({"prompt": "x", "top_p": 1.0000000001})", 400, "BadRequestError", "top_p",
       "top_p must be in (0, 1], got 1.0000000001."},
      {R"({"prompt": "x", "temperature": -1e-300})", 400, "BadRequestError", "temperature",
       "temperature must be non-negative, got -1e-300."},
      {R"({"prompt": "x", "min_p": 1.0000000001})", 400, "BadRequestError", "min_p",
       "got 1.0000000001."},
      {R"({"prompt": "x", "presence_penalty": 2.0000000001})", 400, "BadRequestError",
       "presence_penalty", "got 2.0000000001."},
      {R"({"prompt": "x", "frequency_penalty": -2.0000000001})", 400, "BadRequestError",
       "frequency_penalty", "got -2.0000000001."},
      {R"({"prompt": "x", "repetition_penalty": -1e-300})", 400, "BadRequestError",
       "repetition_penalty", "greater than zero, got -1e-300."},
      {R"({"prompt": "x", "top_k": -2})", 400, "BadRequestError", "top_k", "top_k"},
      {R"({"prompt": "x", "min_p": 2})", 400, "BadRequestError", "min_p", "[0, 1]"},
      {R"({"prompt": "x", "n": 129})", 400, "BadRequestError", "n", "at most 128"},
      {R"({"prompt": "x", "n": "2"})", 400, "BadRequestError", "n", "must be an integer"},
      {R"({"prompt": "x", "n": 0})", 400, "BadRequestError", "n", "at least 1"},
      {R"({"prompt": "x", "stop": 3})", 400, "BadRequestError", "stop",
       "string or a list of strings"},
      {R"({"prompt": "x", "stop": ["a", 1]})", 400, "BadRequestError", "stop", "list of strings"},
      {R"({"prompt": "x", "stop_token_ids": [1000]})", 400, "BadRequestError", "stop_token_ids",
       "outside the vocabulary"},
      {R"({"prompt": "x", "stop_token_ids": "a"})", 400, "BadRequestError", "stop_token_ids",
       "list of integers"},
      {R"({"prompt": "x", "stream": "yes"})", 400, "BadRequestError", "stream",
       "must be a boolean"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400, "BadRequestError",
       "stream_options", "only be defined when `stream=True`"},
      {R"({"prompt": "x", "min_tokens": -1})", 400, "BadRequestError", "min_tokens",
       "non-negative"},
      {R"({"prompt": "x", "max_tokens": 3, "min_tokens": 4})", 400, "BadRequestError", "min_tokens",
       "less than or equal to max_tokens"},
      {R"({"prompt": "x", "presence_penalty": 3})", 400, "BadRequestError", "presence_penalty",
       "[-2, 2]"},
      {R"({"prompt": "x", "frequency_penalty": -3})", 400, "BadRequestError", "frequency_penalty",
       "[-2, 2]"},
      {R"({"prompt": "x", "repetition_penalty": 0})", 400, "BadRequestError", "repetition_penalty",
       "greater than zero"},
      {R"({"prompt": "x", "logprobs": 21})", 400, "BadRequestError", "logprobs",
       "between 0 and 20, got 21"},
      {R"({"prompt": "x", "logprobs": -1})", 400, "BadRequestError", "logprobs",
       "between 0 and 20"},
      {R"({"prompt": "x", "logprobs": true})", 400, "BadRequestError", "logprobs",
       "must be an integer"},
      {R"({"prompt": "x", "echo": 1})", 400, "BadRequestError", "echo", "must be a boolean"},
      {R"({"prompt": "x", "n": 2, "best_of": 1})", 400, "BadRequestError", "best_of",
       "greater than or equal to n"},
      {R"({"prompt": "x", "best_of": "2"})", 400, "BadRequestError", "best_of",
       "must be an integer"},
      {R"({"prompt": "x", "best_of": 3, "stream": true})", 400, "BadRequestError", "best_of",
       "stream"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", 400, "BadRequestError", "logit_bias",
       "[-100, 100]"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", 400, "BadRequestError", "logit_bias",
       "token ids"},
      // Two spellings of one id would otherwise add up past the bound.
      {R"({"prompt": "x", "logit_bias": {"13": 100, "013": 100}})", 400, "BadRequestError",
       "logit_bias", "names token id 13 more than once"},
      {R"({"prompt": "x", "logit_bias": {"300": 1}})", 400, "BadRequestError", "logit_bias",
       "outside the vocabulary"},
      {R"({"prompt": "x", "logit_bias": {"5": "1"}})", 400, "BadRequestError", "logit_bias",
       "must be a number"},
      {R"({"prompt": "x", "logit_bias": [1]})", 400, "BadRequestError", "logit_bias",
       "must be an object"},
      {R"({"prompt": "x", "suffix": "end"})", 400, "BadRequestError", "suffix",
       "not supported yet"},
      {R"({"prompt": "x", "seed": "1"})", 400, "BadRequestError", "seed", "must be an integer"},
      {R"({"prompt": "x", "ignore_eos": 1})", 400, "BadRequestError", "ignore_eos",
       "must be a boolean"},
      {R"({"prompt": "x", "skip_special_tokens": "no"})", 400, "BadRequestError",
       "skip_special_tokens", "boolean"},
      {R"({"prompt": "x", "spaces_between_special_tokens": 0})", 400, "BadRequestError",
       "spaces_between_special_tokens", "boolean"},
      {R"({"prompt": "x", "include_stop_str_in_output": "y"})", 400, "BadRequestError",
       "include_stop_str_in_output", "boolean"},
      {R"({"prompt": "x", "add_special_tokens": "y"})", 400, "BadRequestError",
       "add_special_tokens", "boolean"},
      {R"({"prompt": "x", "stream": true, "stream_options": 1})", 400, "BadRequestError",
       "stream_options", "must be an object"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": "y"}})", 400,
       "BadRequestError", "include_usage", "boolean"},
      {R"({"prompt": "x", "response_format": {"type": "xml"}})", 400, "BadRequestError",
       "response_format", "must be 'text'"},
      {R"({"prompt": "x", "response_format": "text"})", 400, "BadRequestError", "response_format",
       "must be an object"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "strin"}}}})",
       400, "BadRequestError", "response_format", "unknown type 'strin'"},
      {R"({"prompt": "x", "user": 5})", 400, "BadRequestError", "user", "must be a string"},
      // vLLM's SamplingParams refuses empty stop strings.
      {R"({"prompt": "x", "stop": ""})", 400, "BadRequestError", "stop",
       "stop cannot contain an empty string."},
      {R"({"prompt": "x", "stop": ["a", ""]})", 400, "BadRequestError", "stop",
       "cannot contain an empty string"},
      // A number beyond double range is the client's input: 400, naming its field.
      {R"({"prompt": "x", "temperature": 1e999})", 400, "BadRequestError", "temperature",
       "beyond the range of a double in 'temperature'"},
      {R"({"prompt": "x", "logit_bias": {"5": -1e400}})", 400, "BadRequestError", "logit_bias",
       "beyond the range of a double in '5'"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.body);
    OpenAIError e = err_completion(c.body);
    EXPECT_EQ(e.status, c.status);
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
    json j = e.to_json();
    EXPECT_EQ(j["error"]["code"], c.status);
    EXPECT_EQ(j["error"]["type"], c.type);
    EXPECT_EQ(j["error"]["message"], e.message);
    if (*c.param)
      EXPECT_EQ(j["error"]["param"], c.param);
    else
      EXPECT_TRUE(j["error"]["param"].is_null());
  }
}

TEST(ProtocolCompletion, AcceptedEdgeValues) {
  // Exactly filling the context, null fields, best_of 1, empty logit_bias,
  // response_format text, logprobs null, integral floats.
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "max_tokens": 62})").sampling.max_tokens.value(), 62);
  ok_completion(
      R"({"prompt": "x", "max_tokens": null, "temperature": null, "stop": null, "best_of": 1,
                    "logit_bias": {}, "response_format": {"type": "text"}, "logprobs": null, "echo": false})");
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "max_tokens": 4.0})").sampling.max_tokens.value(), 4);
  // ... in integer lists too (pydantic's lax int, as vLLM validates).
  EXPECT_EQ(
      ok_completion(R"({"prompt": [5.0, 6], "stop_token_ids": [2.0], "allowed_token_ids": [7.0]})")
          .prompt_token_ids,
      (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "stop_token_ids": [2.0]})").sampling.stop_token_ids,
            (std::vector<int32_t>{2}));
  // vLLM: completions' logprobs up to max_logprobs (20); an empty
  // stream_options without stream is accepted.
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "logprobs": 20})").sampling.logprobs.value(), 20);
  EXPECT_FALSE(ok_completion(R"({"prompt": "x", "stream_options": {}})").include_usage);
}

// vLLM's SamplingParams._verify_greedy_sampling: with temperature 0 and no
// beam search the best_of candidates would all be the one greedy sequence,
// so best_of > 1 is a 400 naming it (the HTTP API, LLM.generate's requests
// and the Python SamplingParams' own check alike).
TEST(ProtocolCompletion, BestOfAboveOneIsRefusedWithGreedySampling) {
  const ServingModel m = make_test_model();
  for (const char* body : {R"({"prompt": "x", "best_of": 2, "temperature": 0})",
                           R"({"prompt": "x", "n": 2, "best_of": 3, "temperature": 1e-6})"}) {
    SCOPED_TRACE(body);
    const OpenAIError e = err_completion(body, m);
    EXPECT_EQ(e.status, 400);
    const json j = json::parse(e.body());
    EXPECT_EQ(j["error"]["type"], "BadRequestError");
    EXPECT_EQ(j["error"]["param"], "best_of");
    EXPECT_NE(e.message.find("best_of must be 1 when using greedy sampling, got "),
              std::string::npos)
        << e.message;
    ParseResult offline = parse_offline_object(json::parse(body), m);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(offline));
    EXPECT_EQ(std::get<OpenAIError>(offline).param, "best_of");
    json fields = json::parse(body);
    fields.erase("prompt");
    const std::optional<OpenAIError> checked = check_sampling_fields(fields);
    ASSERT_TRUE(checked.has_value());
    EXPECT_EQ(checked->param, "best_of");
  }
  // Sampling, beam search (best_of beams), best_of 1: accepted.
  ok_completion(R"({"prompt": "x", "best_of": 2, "temperature": 0.5})", m);
  ok_completion(R"({"prompt": "x", "best_of": 2, "temperature": 0, "use_beam_search": true})", m);
  ok_completion(R"({"prompt": "x", "best_of": 1, "temperature": 0})", m);
  EXPECT_FALSE(
      check_sampling_fields(json{{"best_of", 2}, {"temperature", 0}, {"use_beam_search", true}}));
  EXPECT_FALSE(check_sampling_fields(json{{"best_of", 2}}));  // SamplingParams' temperature 1
}

// vLLM's SamplingParams._verify_greedy_sampling refuses n > 1 with greedy
// sampling too ("n must be 1 when using greedy sampling, got 2."; vLLM v0
// said it of best_of, which defaulted to n): the n choices would all be the
// one greedy sequence. A 400 naming "n" on every endpoint, LLM.generate's
// requests and the Python SamplingParams' own check; beam search (n beams)
// and sampling take n > 1.
TEST(ProtocolCompletion, NAboveOneIsRefusedWithGreedySampling) {
  const ServingModel m = make_test_model();
  const std::string messages = R"("messages": [{"role": "user", "content": "q"}])";
  const std::vector<std::pair<std::string, ParseResult>> cases = {
      {"completions", parse_completion_request(R"({"prompt": "x", "n": 2, "temperature": 0})", m)},
      {"chat", parse_chat_request("{" + messages + R"(, "n": 3, "temperature": 0})", m)},
      {"generate", parse_generate_request(R"({"prompt": "x", "n": 2, "temperature": 1e-6})", m)},
      {"offline",
       parse_offline_object(json::parse(R"({"prompt": "x", "n": 2, "temperature": 0})"), m)},
  };
  for (const auto& [what, r] : cases) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r));
    const OpenAIError& e = std::get<OpenAIError>(r);
    EXPECT_EQ(e.status, 400);
    const json j = json::parse(e.body());
    EXPECT_EQ(j["error"]["type"], "BadRequestError");
    EXPECT_EQ(j["error"]["param"], "n");
    EXPECT_NE(e.message.find("n must be 1 when using greedy sampling, got "), std::string::npos)
        << e.message;
  }
  const std::optional<OpenAIError> checked =
      check_sampling_fields(json::parse(R"({"n": 2, "temperature": 0})"));
  ASSERT_TRUE(checked.has_value());
  EXPECT_EQ(checked->param, "n");
  EXPECT_EQ(checked->message, "n must be 1 when using greedy sampling, got 2.");
  // Sampling, beam search (n beams), n 1: accepted.
  ok_completion(R"({"prompt": "x", "n": 2, "temperature": 0.5})", m);
  ok_completion(R"({"prompt": "x", "n": 2, "temperature": 0, "use_beam_search": true})", m);
  ok_completion(R"({"prompt": "x", "n": 1, "temperature": 0})", m);
  EXPECT_FALSE(check_sampling_fields(json::parse(R"({"n": 2, "temperature": 0.7})")));
}

// vLLM's SamplingParams(...) raises at construction for every check that
// needs no model; check_sampling_fields (the Python SamplingParams and
// `pagoda generate`'s flags, before any model loads) runs the request
// pipeline's own code for them: the same message and field as
// parse_offline_object with the model. Only what needs the model (ids
// against the vocabulary, the context) waits.
TEST(ProtocolOffline, ModelIndependentSamplingChecksNeedNoModel) {
  const ServingModel m = make_test_model();
  const char* refused[][2] = {
      {R"({"stop": ""})", "stop"},
      {R"({"stop": ["a", ""]})", "stop"},
      {R"({"min_tokens": 5, "max_tokens": 2})", "min_tokens"},
      {R"({"min_tokens": 20})", "min_tokens"},  // SamplingParams' max_tokens 16
      {R"({"truncate_prompt_tokens": 0})", "truncate_prompt_tokens"},
      {R"({"logit_bias": {"5": 200}})", "logit_bias"},
      {R"({"logit_bias": {"x": 1}})", "logit_bias"},
      {R"({"logit_bias": {"-1": 1}})", "logit_bias"},
      {R"({"logit_bias": {"5": "1"}})", "logit_bias"},
      {R"({"logit_bias": {"13": 1, "013": 1}})", "logit_bias"},
      {R"({"stop_token_ids": [-1]})", "stop_token_ids"},
      {R"({"allowed_token_ids": []})", "allowed_token_ids"},
      {R"({"allowed_token_ids": [-3]})", "allowed_token_ids"},
      {R"({"bad_words": [1]})", "bad_words"},
  };
  for (const auto& [fields, param] : refused) {
    SCOPED_TRACE(fields);
    const std::optional<OpenAIError> checked = check_sampling_fields(json::parse(fields));
    ASSERT_TRUE(checked.has_value());
    EXPECT_EQ(checked->param, param);
    json request = json::parse(fields);
    request["prompt"] = "x";
    const ParseResult with_model = parse_offline_object(request, m);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(with_model));
    if (std::string_view(param) == "logit_bias" &&
        std::string_view(fields).find("-1") != std::string_view::npos) {
      // The vocabulary is named only where it is known.
      EXPECT_EQ(checked->message,
                "logit_bias token id -1 is outside the vocabulary [0, vocab_size)");
      EXPECT_EQ(std::get<OpenAIError>(with_model).message,
                "logit_bias token id -1 is outside the vocabulary [0, 259)");
    } else if (std::string_view(param) != "stop_token_ids") {
      EXPECT_EQ(checked->message, std::get<OpenAIError>(with_model).message);
    }
    EXPECT_EQ(std::get<OpenAIError>(with_model).param, param);
  }
  EXPECT_EQ(check_sampling_fields(json::parse(R"({"stop": ""})"))->message,
            "stop cannot contain an empty string.");
  EXPECT_EQ(check_sampling_fields(json::parse(R"({"min_tokens": 5, "max_tokens": 2})"))->message,
            "min_tokens must be less than or equal to max_tokens=2, got 5.");
  EXPECT_EQ(check_sampling_fields(json::parse(R"({"truncate_prompt_tokens": 0})"))->message,
            "truncate_prompt_tokens must be an integer >= 1 or -1, got 0");
  EXPECT_EQ(check_sampling_fields(json::parse(R"({"logit_bias": {"5": 200}})"))->message,
            "logit_bias['5'] must be in [-100, 100], got 200");
  // Accepted without a model: ids past this test model's 259 (checked when
  // a model is known), min_tokens with max_tokens None, the bounds.
  for (const char* fields :
       {R"({"logit_bias": {"1000": 100}})", R"({"stop_token_ids": [1000]})",
        R"({"allowed_token_ids": [1000]})", R"({"min_tokens": 100, "max_tokens": null})",
        R"({"min_tokens": 16})", R"({"min_tokens": 2, "max_tokens": 2})",
        R"({"truncate_prompt_tokens": -1})", R"({"stop": ["a"], "bad_words": ["b"]})",
        R"({"logit_bias": {"5": -100, "6": 100}})"}) {
    SCOPED_TRACE(fields);
    const std::optional<OpenAIError> checked = check_sampling_fields(json::parse(fields));
    EXPECT_FALSE(checked.has_value()) << checked->message;
  }
}

// temperature (and every number field) must be finite in every front end:
// JSON cannot carry inf or nan, but `pagoda generate --temperature inf` and
// the C++ LLM build the object directly (the Python SamplingParams refused
// them already). A large finite temperature (1e308, which vLLM takes) is
// accepted and samples as the largest float, not as inf.
TEST(ProtocolOffline, NonFiniteNumbersAreRefusedEverywhere) {
  const ServingModel m = make_test_model();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* field : {"temperature", "top_p", "min_p", "presence_penalty",
                            "frequency_penalty", "repetition_penalty", "length_penalty"}) {
    for (double v : {inf, -inf, nan}) {
      SCOPED_TRACE(fmt::format("{} {}", field, v));
      const std::optional<OpenAIError> checked = check_sampling_fields(json{{field, v}});
      ASSERT_TRUE(checked.has_value());
      EXPECT_EQ(checked->param, field);
      EXPECT_EQ(checked->message, fmt::format("{} must be a finite number, got {}", field, v));
      const ParseResult offline = parse_offline_object(json{{"prompt", "x"}, {field, v}}, m);
      ASSERT_TRUE(std::holds_alternative<OpenAIError>(offline));
      EXPECT_EQ(std::get<OpenAIError>(offline).param, field);
      const ParseResult http = parse_completion_object(json{{"prompt", "x"}, {field, v}}, m);
      ASSERT_TRUE(std::holds_alternative<OpenAIError>(http));
      EXPECT_EQ(std::get<OpenAIError>(http).message, checked->message);
    }
  }
  EXPECT_EQ(check_sampling_fields(json{{"temperature", inf}})->message,
            "temperature must be a finite number, got inf");
  EXPECT_FALSE(check_sampling_fields(json{{"temperature", 1e308}}));
  const ParsedRequest r = ok_completion(R"({"prompt": "x", "temperature": 1e308})", m);
  EXPECT_EQ(r.sampling.temperature, std::numeric_limits<float>::max());
  // 1e999 is not a double: refused while the body is parsed (its own test).
  EXPECT_EQ(err_completion(R"({"prompt": "x", "temperature": 1e999})", m).param, "temperature");
}

TEST(ProtocolChat, RendersTemplateWithoutDoubleBos) {
  ParseResult pr = parse_chat_request(
      R"({"model": "tiny", "messages": [{"role": "system", "content": "S"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 5, "max_tokens": 9, "stream": true})",
      make_test_model());
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(pr)) << std::get<OpenAIError>(pr).body();
  const ParsedRequest& r = std::get<ParsedRequest>(pr);
  EXPECT_EQ(r.kind, ApiKind::kChat);
  EXPECT_EQ(r.request_id.rfind("chatcmpl-", 0), 0u);
  // The template writes "<s>" as text; tokenized without special tokens, so
  // no BOS id is prepended (the byte tokenizer spells "<s>" as bytes).
  std::string expected_text = "<s>[system]S[user]a\nb[assistant]";
  std::vector<int32_t> expected;
  for (unsigned char c : expected_text) expected.push_back(c + 3);
  EXPECT_EQ(r.prompt_token_ids, expected);
  EXPECT_EQ(r.sampling.max_tokens.value(), 5);  // max_completion_tokens wins
  EXPECT_TRUE(r.stream);

  ParseResult no_gen = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "add_generation_prompt": false})",
      make_test_model());
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(no_gen));
  EXPECT_EQ(std::get<ParsedRequest>(no_gen).prompt_token_ids.size(),
            std::string("<s>[user]q").size());
}

// Deeply nested JSON (a 60 KB body once overflowed a network thread's stack
// while the chat messages were copied) is refused at parse time.
TEST(ProtocolRequest, DeeplyNestedBodiesAreRefused) {
  const int depth = 30000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  OpenAIError e = err_chat(R"({"messages": [{"role": "user", "content": "hi", "x": )" + deep +
                           R"(}], "max_tokens": 2})");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("deeper than 64 levels"), std::string::npos) << e.message;
  OpenAIError c = err_completion(R"({"prompt": "x", "extra": )" + deep + "}");
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(c.message.find("deeper than 64 levels"), std::string::npos) << c.message;
  // Ordinary nesting still parses.
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "extra": [[[{"a": [1]}]]]})").prompt_token_ids.size(),
            2u);
}

TEST(ProtocolChat, ErrorCases) {
  const ErrorCase cases[] = {
      {R"({"model": "tiny"})", 400, "BadRequestError", "messages", "'messages' is required"},
      {R"({"messages": "hi"})", 400, "BadRequestError", "messages", "must be a list"},
      {R"({"messages": []})", 400, "BadRequestError", "messages", "must not be empty"},
      {R"({"messages": [{"content": "hi"}]})", 400, "BadRequestError", "messages",
       "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", 400, "BadRequestError", "messages",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       400, "BadRequestError", "messages", "has type 'image_url': only text parts"},
      {R"({"messages": [{"role": "user", "content": "q"}], "model": "other"})", 404,
       "NotFoundError", "model", "The model `other` does not exist."},
      {R"({"messages": [{"role": "user", "content": "q"}], "max_completion_tokens": 0})", 400,
       "BadRequestError", "max_completion_tokens", "at least 1"},
      {R"({"messages": [{"role": "user", "content": "q"}], "max_tokens": 60})", 400,
       "BadRequestError", "max_tokens", "(21 in the messages, 60 in the completion)"},
      {R"({"messages": [{"role": "user", "content": "q"}], "logprobs": 1})", 400, "BadRequestError",
       "logprobs", "must be a boolean"},
      {R"({"messages": [{"role": "user", "content": "q"}], "top_logprobs": 3})", 400,
       "BadRequestError", "top_logprobs", "`logprobs` must be set to true"},
      {R"({"messages": [{"role": "user", "content": "q"}], "logprobs": true, "top_logprobs": 21})",
       400, "BadRequestError", "top_logprobs", "between 0 and 20"},
      {R"({"messages": [{"role": "user", "content": "q"}], "tool_choice": "auto"})", 400,
       "BadRequestError", "tool_choice", "`tools` must be set"},
      {R"({"messages": [{"role": "user", "content": "q"}], "response_format": {"type": "json_schema"}})",
       400, "BadRequestError", "response_format", "json_schema is required"},
      {R"({"messages": [{"role": "user", "content": "q"}], "add_generation_prompt": 1})", 400,
       "BadRequestError", "add_generation_prompt", "boolean"},
      {R"({"messages": [{"role": "user", "content": "q"}], "echo": 1})", 400, "BadRequestError",
       "echo", "boolean"},
      {R"({"messages": [{"role": "user", "content": "q"}], "max_completion_tokens": "2"})", 400,
       "BadRequestError", "max_completion_tokens", "must be an integer"},
      {R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]})", 400,
       "BadRequestError", "tools", "tools[0].function is required"},
      {R"({"messages": [{"role": "user", "content": "q"}], "n": 0})", 400, "BadRequestError", "n",
       "at least 1"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.body);
    OpenAIError e = err_chat(c.body);
    EXPECT_EQ(e.status, c.status);
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
  }
}

TEST(ProtocolChat, NoTemplateIsA400NamingTheProblem) {
  OpenAIError e =
      err_chat(R"({"messages": [{"role": "user", "content": "q"}]})", make_test_model(false));
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("no chat template"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("--chat-template"), std::string::npos) << e.message;
}

TEST(ProtocolChat, TemplateExceptionIsA400WithItsMessage) {
  ServingModel m = make_test_model();
  m.chat_renderer = [](const nlohmann::ordered_json&, const ChatRenderOptions&) -> std::string {
    throw ChatTemplateError("Conversation roles must alternate user/assistant/user/assistant/...");
  };
  OpenAIError e = err_chat(R"({"messages": [{"role": "assistant", "content": "q"}]})", m);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("Conversation roles must alternate"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace pagoda
