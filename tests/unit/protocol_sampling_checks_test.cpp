// The checks across SamplingParams fields (server/sampling_checks.h): made
// without a model by check_sampling_fields (the Python SamplingParams at
// construction, `pagoda generate` before the model loads) with the same
// message and field as the request parsers, and max_logprobs bounding the
// logprobs asked for and the beam width (beam search asks for its
// candidates as top logprobs) with a 400 before anything runs.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/openai_request.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_protocol::make_test_model;

OpenAIError error_of(const ParseResult& r) {
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r));
  return std::holds_alternative<OpenAIError>(r) ? std::get<OpenAIError>(r) : OpenAIError{};
}

// vLLM's SamplingParams raises these at construction; they used to wait for
// the model (pagoda generate: exit 1 after loading it; Python: generate()).
TEST(SamplingChecks, CrossFieldChecksNeedNoModel) {
  const ServingModel m = make_test_model();
  struct Case {
    const char* fields;
    const char* param;
    const char* message;
  };
  const Case refused[] = {
      {R"({"n": 3, "best_of": 2})", "best_of",
       "best_of must be greater than or equal to n, got n=3 and best_of=2."},
      {R"({"best_of": 0})", "best_of",
       "best_of must be greater than or equal to n, got n=1 and best_of=0."},
      {R"({"use_beam_search": true, "temperature": 0.5})", "temperature",
       "temperature must be 0 when using beam search."},
      {R"({"use_beam_search": true, "temperature": 0, "top_k": 5})", "top_k",
       "top_k must be -1 when using beam search."},
      {R"({"use_beam_search": true, "temperature": 0, "min_tokens": 2})", "min_tokens",
       "min_tokens is not supported with use_beam_search yet"},
      {R"({"length_penalty": 2})", "length_penalty",
       "length_penalty is not effective and must be the default value of 1.0 when not using beam "
       "search."},
      {R"({"early_stopping": true})", "early_stopping",
       "early_stopping is not effective and must be False when not using beam search."},
      {R"({"use_beam_search": true, "temperature": 0, "early_stopping": "x"})", "early_stopping",
       "early_stopping must be true, false or \"never\""},
      {R"({"use_beam_search": true, "temperature": 0, "n": 11})", "n",
       "n=11 is too many beams: beam search asks the engine for 2 x 11 = 22 next-token "
       "candidates per step, as top logprobs, and they must be <= max_logprobs (20; "
       "--max-logprobs, LLM(max_logprobs=...)): at most 10 beams"},
      {R"({"use_beam_search": true, "temperature": 0, "n": 2, "best_of": 11})", "best_of",
       "best_of=11 is too many beams: beam search asks the engine for 2 x 11 = 22 next-token "
       "candidates per step, as top logprobs, and they must be <= max_logprobs (20; "
       "--max-logprobs, LLM(max_logprobs=...)): at most 10 beams"},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.fields);
    const std::optional<OpenAIError> checked = check_sampling_fields(json::parse(c.fields));
    ASSERT_TRUE(checked.has_value());
    EXPECT_EQ(checked->param, c.param);
    EXPECT_EQ(checked->message, c.message);
    json request = json::parse(c.fields);
    request["prompt"] = "x";
    const OpenAIError with_model = error_of(parse_offline_object(request, m));
    EXPECT_EQ(with_model.param, c.param);
    EXPECT_EQ(with_model.message, c.message);
  }
  // Accepted without a model: an unset temperature is the model's to give
  // (generation_config.json), and 10 beams ask for 20 candidates.
  for (const char* fields :
       {R"({"use_beam_search": true})", R"({"use_beam_search": true, "temperature": 0, "n": 10})",
        R"({"n": 2, "best_of": 2})", R"({"early_stopping": false})"}) {
    SCOPED_TRACE(fields);
    const std::optional<OpenAIError> checked = check_sampling_fields(json::parse(fields));
    EXPECT_FALSE(checked.has_value()) << checked->message;
  }
}

// Beam width 11 asks for 22 candidates a step: a 400 naming the field when
// the request is parsed, so before a stream's 200 (it used to fail late,
// "logprobs must be in [0, 20]" with param null, an error event after a 200
// when streamed).
TEST(SamplingChecks, BeamWidthBeyondMaxLogprobsIsRefusedBeforeAnyStream) {
  const ServingModel m = make_test_model();
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    json body = {{"prompt", "x"}, {"use_beam_search", true}, {"temperature", 0}, {"n", 11}};
    body["stream"] = stream;
    const OpenAIError e = error_of(parse_completion_request(body.dump(), m));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(json::parse(e.body())["error"]["param"], "n");
    EXPECT_NE(e.message.find("2 x 11 = 22 next-token candidates"), std::string::npos) << e.message;
  }
  const std::string messages = R"("messages": [{"role": "user", "content": "q"}])";
  EXPECT_EQ(error_of(parse_chat_request("{" + messages +
                                            R"(, "use_beam_search": true, "temperature": 0,
                                                 "best_of": 12})",
                                        m))
                .param,
            "best_of");
  EXPECT_EQ(
      error_of(parse_generate_request(
                   R"({"prompt": "x", "use_beam_search": true, "temperature": 0, "n": 16})", m))
          .param,
      "n");
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(parse_completion_request(
      R"({"prompt": "x", "use_beam_search": true, "temperature": 0, "n": 10})", m)));
  // The model's eos id (2) and a stop token id end beams: HF asks for
  // (1 + 2) x 7 = 21 candidates. Only the stop token id is known without
  // the model, so the model's check is the one that refuses it.
  const char* fields =
      R"({"use_beam_search": true, "temperature": 0, "n": 7, "stop_token_ids": [5]})";
  EXPECT_FALSE(check_sampling_fields(json::parse(fields)).has_value());
  json request = json::parse(fields);
  request["prompt"] = "x";
  const OpenAIError e = error_of(parse_completion_object(request, m));
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(e.message,
            "n=7 is too many beams: beam search asks the engine for 3 x 7 = 21 next-token "
            "candidates per step (3 = 1 + the 2 eos / stop token ids, as HF transformers), as "
            "top logprobs, and they must be <= max_logprobs (20; --max-logprobs, "
            "LLM(max_logprobs=...)): at most 6 beams");
  request["n"] = 6;
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(parse_completion_object(request, m)));
}

// vLLM's max_logprobs (--max-logprobs) bounds logprobs, top_logprobs and
// prompt_logprobs, and the beam width.
TEST(SamplingChecks, MaxLogprobsBoundsLogprobsAndBeams) {
  ServingModel m = make_test_model();
  m.max_logprobs = 5;
  const OpenAIError lp = error_of(parse_completion_request(R"({"prompt": "x", "logprobs": 6})", m));
  EXPECT_EQ(lp.param, "logprobs");
  EXPECT_EQ(lp.message,
            "logprobs must be between 0 and 5, got 6: the engine's max_logprobs is 5 "
            "(--max-logprobs; LLM(max_logprobs=...))");
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(
      parse_completion_request(R"({"prompt": "x", "logprobs": 5})", m)));
  EXPECT_EQ(error_of(parse_completion_request(R"({"prompt": "x", "prompt_logprobs": 6})", m)).param,
            "prompt_logprobs");
  EXPECT_EQ(error_of(parse_completion_request(
                         R"({"prompt": "x", "echo": true, "logprobs": 6, "max_tokens": 1})", m))
                .param,
            "logprobs");
  EXPECT_EQ(error_of(parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}],
                                            "logprobs": true, "top_logprobs": 6})",
                                        m))
                .param,
            "top_logprobs");
  EXPECT_EQ(error_of(parse_offline_object(json{{"prompt", "x"}, {"logprobs", 6}}, m)).param,
            "logprobs");
  const OpenAIError beams = error_of(parse_completion_request(
      R"({"prompt": "x", "use_beam_search": true, "temperature": 0, "n": 3})", m));
  EXPECT_EQ(beams.param, "n");
  EXPECT_NE(beams.message.find("2 x 3 = 6"), std::string::npos) << beams.message;
  EXPECT_NE(beams.message.find("max_logprobs (5;"), std::string::npos) << beams.message;
  EXPECT_NE(beams.message.find("at most 2 beams"), std::string::npos) << beams.message;
  // Without a model: the engine's bound when the caller knows it (`pagoda
  // generate --max-logprobs`), else the most any engine takes (20).
  EXPECT_EQ(check_sampling_fields(json{{"logprobs", 6}}, 5)->param, "logprobs");
  EXPECT_EQ(check_sampling_fields(json{{"prompt_logprobs", 6}}, 5)->param, "prompt_logprobs");
  EXPECT_FALSE(check_sampling_fields(json{{"logprobs", 6}}).has_value());
  m.max_logprobs = 1;
  EXPECT_NE(error_of(parse_completion_request(
                         R"({"prompt": "x", "use_beam_search": true, "temperature": 0})", m))
                .message.find("beam search needs max_logprobs >= 2"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda
