// Prompt logprobs on the protocol layer (byte tokenizer: id = byte + 3,
// 1 = <s>): the temporary `prompt_logprobs` parse, completions choices' and
// chat's top-level `prompt_logprobs` lists, and completions' echo with
// logprobs (prompt entries first, streamed with the first delta), by hand.
#include <gtest/gtest.h>

#include "server/openai_request.h"
#include "server/choice_output.h"
#include "server/openai_response.h"
#include "server/ws_protocol.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_protocol::make_test_model;

ParsedRequest parse_ok(ParseResult r) {
  if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
  return std::get<ParsedRequest>(r);
}

OpenAIError parse_err(ParseResult r) {
  EXPECT_TRUE(std::holds_alternative<OpenAIError>(r));
  return std::holds_alternative<OpenAIError>(r) ? std::get<OpenAIError>(r) : OpenAIError{};
}

int32_t id(char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)) + 3; }

// Prompt "hi" = <s> h i: entries for 'h' (rank 2, top-1 'x') and 'i' (rank
// 1, top-1 itself).
std::vector<PromptLogprob> hi_logprobs() {
  return {PromptLogprob{id('h'), -1.5f, 2, {{id('x'), -0.5f}}},
          PromptLogprob{id('i'), -0.25f, 1, {{id('i'), -0.25f}}}};
}

RequestOutput finished_output(int index = 0) {
  RequestOutput out;
  out.index = index;
  out.text.push_back('!');
  out.token_ids = {id('!')};
  out.logprobs = {TokenLogprob{id('!'), -0.75f, {{id('?'), -0.5f}}}};
  out.finished = true;
  out.finish_reason = FinishReason::kLength;
  out.prompt_tokens = 3;
  out.completion_tokens = 1;
  return out;
}

const json kHiPromptLogprobs = json::parse(R"([null,
  {"107": {"logprob": -1.5, "rank": 2, "decoded_token": "h"}, "123": {"logprob": -0.5, "rank": 1, "decoded_token": "x"}},
  {"108": {"logprob": -0.25, "rank": 1, "decoded_token": "i"}}])");

TEST(ProtocolPromptLogprobs, ParsedForBothEndpointsWithVllmLimits) {
  ServingModel m = make_test_model();
  EXPECT_EQ(parse_ok(parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": 2})", m))
                .sampling.prompt_logprobs,
            2);
  EXPECT_EQ(
      parse_ok(parse_chat_request(
                   R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 0})", m))
          .sampling.prompt_logprobs,
      0);
  EXPECT_FALSE(
      parse_ok(parse_completion_request(R"({"prompt": "hi"})", m)).sampling.prompt_logprobs);
  OpenAIError e =
      parse_err(parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": 21})", m));
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_NE(e.message.find("between 0 and 20"), std::string::npos) << e.message;
  e = parse_err(
      parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": 1, "stream": true})", m));
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_NE(e.message.find("stream=True"), std::string::npos) << e.message;
  e = parse_err(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 1, "stream": true})",
      m));
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_EQ(parse_ok(parse_completion_request(
                         R"({"prompt": "hi", "prompt_logprobs": 0, "stream": true})", m))
                .sampling.prompt_logprobs,
            0);
  e = parse_err(parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": "2"})", m));
  EXPECT_EQ(e.param, "prompt_logprobs");
}

TEST(ProtocolPromptLogprobs, EchoWithLogprobsAsksForThePromptsLogprobs) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "echo": true, "logprobs": 1})", m));
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.sampling.logprobs, 1);
  EXPECT_EQ(r.sampling.prompt_logprobs, 1);
  // Streamed too (vLLM: only an explicit prompt_logprobs is refused).
  EXPECT_EQ(parse_ok(parse_completion_request(
                         R"({"prompt": "hi", "echo": true, "logprobs": 2, "stream": true})", m))
                .sampling.prompt_logprobs,
            2);
  // An explicit prompt_logprobs wins; echo alone asks for none.
  EXPECT_EQ(
      parse_ok(parse_completion_request(
                   R"({"prompt": "hi", "echo": true, "logprobs": 1, "prompt_logprobs": 3})", m))
          .sampling.prompt_logprobs,
      3);
  EXPECT_FALSE(parse_ok(parse_completion_request(R"({"prompt": "hi", "echo": true})", m))
                   .sampling.prompt_logprobs);
}

TEST(ProtocolPromptLogprobs, CompletionChoicesCarryTheList) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": 1, "n": 2})", m));
  ASSERT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{1, id('h'), id('i')}));
  // The engine puts them on one choice's first delta; both choices show them.
  std::vector<RequestOutput> choices = {finished_output(0), finished_output(1)};
  choices[1].prompt_logprobs = hi_logprobs();
  json j = completion_response(r, choices);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["prompt_logprobs"], kHiPromptLogprobs);
  EXPECT_EQ(j["choices"][1]["prompt_logprobs"], kHiPromptLogprobs);
  EXPECT_FALSE(j.contains("prompt_logprobs"));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  // Not asked for: no key.
  ParsedRequest plain = parse_ok(parse_completion_request(R"({"prompt": "hi"})", m));
  EXPECT_FALSE(
      completion_response(plain, finished_output())["choices"][0].contains("prompt_logprobs"));
}

TEST(ProtocolPromptLogprobs, ChatCarriesTheListAtTopLevel) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 1})", m));
  // The test template renders "<s>[user]hi..."; fake a 3-token prompt's list.
  RequestOutput out = finished_output();
  out.prompt_logprobs = hi_logprobs();
  json j = completion_response(r, out);
  EXPECT_EQ(j["prompt_logprobs"], kHiPromptLogprobs);
  EXPECT_FALSE(j["choices"][0].contains("prompt_logprobs"));
}

TEST(ProtocolPromptLogprobs, EchoWithLogprobsPutsThePromptFirst) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "echo": true, "logprobs": 1})", m));
  RequestOutput out = finished_output();
  out.prompt_logprobs = hi_logprobs();
  json j = completion_response(r, out);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["text"], "hi!");
  const json& lp = c["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"<s>", "h", "i", "!"}));
  EXPECT_EQ(lp["token_logprobs"], json({nullptr, -1.5, -0.25, -0.75}));
  EXPECT_EQ(lp["top_logprobs"][0], nullptr);
  EXPECT_EQ(lp["top_logprobs"][1], json({{"h", -1.5}, {"x", -0.5}}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"i", -0.25}}));
  EXPECT_EQ(lp["top_logprobs"][3], json({{"!", -0.75}, {"?", -0.5}}));
  // vLLM: offsets accumulate the token strings ("<s>" is 3 characters).
  EXPECT_EQ(lp["text_offset"], json({0, 3, 4, 5}));
  EXPECT_EQ(c["prompt_logprobs"], kHiPromptLogprobs);
}

// Splits SSE text into its `data:` payloads.
std::vector<json> sse_json(const std::string& s) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = s.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string payload = s.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    pos = end + 2;
  }
  return out;
}

TEST(ProtocolPromptLogprobs, StreamedEchoWithLogprobsComesWithTheFirstDelta) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_completion_request(
      R"({"prompt": "hi", "echo": true, "logprobs": 1, "stream": true})", m));
  StreamFormatter f(r);
  ChoiceAssembler assemble(r);  // the request pipeline's (server/choice_output.h)
  EXPECT_EQ(f.begin(), "");  // no prompt chunk of its own
  RequestOutput first = finished_output();
  first.finished = false;
  first.finish_reason = FinishReason::kNone;
  first.prompt_logprobs = hi_logprobs();
  RequestOutput second;
  second.text.push_back('?');
  second.token_ids = {id('?')};
  second.logprobs = {TokenLogprob{id('?'), -2.0f, {}}};
  second.finished = true;
  second.finish_reason = FinishReason::kLength;
  second.completion_tokens = 2;
  const std::vector<json> a = sse_json(f.format({assemble.add(first)}));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["choices"][0]["text"], "hi!");
  EXPECT_EQ(a[0]["choices"][0]["logprobs"]["tokens"], json({"<s>", "h", "i", "!"}));
  EXPECT_EQ(a[0]["choices"][0]["logprobs"]["token_logprobs"][0], nullptr);
  EXPECT_EQ(a[0]["choices"][0]["logprobs"]["text_offset"], json({0, 3, 4, 5}));
  const std::vector<json> b = sse_json(f.format({assemble.add(second)}));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]["choices"][0]["text"], "?");
  EXPECT_EQ(b[0]["choices"][0]["logprobs"]["tokens"], json({"?"}));
  EXPECT_EQ(b[0]["choices"][0]["logprobs"]["text_offset"], json({6}));
  EXPECT_TRUE(f.done());
  // Echo without logprobs: the prompt comes with the first delta too.
  ParsedRequest plain =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "echo": true, "stream": true})", m));
  StreamFormatter g(plain);
  ChoiceAssembler assemble_plain(plain);
  EXPECT_EQ(g.begin(), "");
  RequestOutput only = second;
  only.logprobs.clear();
  const std::vector<json> c = sse_json(g.format({assemble_plain.add(only)}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["choices"][0]["text"], "hi?");
}

// A WebSocket request always streams: refused as with stream=true, not
// computed and dropped.
TEST(ProtocolPromptLogprobs, WebSocketRefusesThemAsAStream) {
  ServingModel m = make_test_model();
  auto msg =
      parse_ws_message(R"({"type":"completion","id":"a","prompt":"hi","prompt_logprobs":1})");
  ASSERT_TRUE(std::holds_alternative<WsClientMessage>(msg));
  EXPECT_EQ(parse_err(parse_ws_generation(std::get<WsClientMessage>(msg), m)).param,
            "prompt_logprobs");
  auto zero =
      parse_ws_message(R"({"type":"completion","id":"a","prompt":"hi","prompt_logprobs":0})");
  ASSERT_TRUE(std::holds_alternative<WsClientMessage>(zero));
  parse_ok(parse_ws_generation(std::get<WsClientMessage>(zero), m));
}

}  // namespace
}  // namespace pagoda
