// Top logprobs come most likely first on every wire format, as OpenAI
// returns them: completions' top_logprobs objects, chat's top_logprobs
// lists, vLLM's prompt_logprobs objects, the /v1/ws delta messages and the
// offline RequestOutput JSON (`pagoda generate`, the Python module). The
// objects came out ordered by key instead (nlohmann::json sorts an
// object's keys: token text, or token id as a string). Byte tokenizer:
// id = byte + 3.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/choice_output.h"
#include "server/llm.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/ws_protocol.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;
using testing_protocol::make_test_model;

ParsedRequest parse_ok(ParseResult r) {
  if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
  return std::get<ParsedRequest>(r);
}

int32_t id(char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)) + 3; }
std::string id_key(char c) { return std::to_string(id(c)); }

// An object's keys in the order its text has them.
std::vector<std::string> keys(const ordered_json& o) {
  std::vector<std::string> out;
  for (auto it = o.begin(); it != o.end(); ++it) out.push_back(it.key());
  return out;
}

// The wire text read back keeping its key order.
ordered_json reparse(const std::string& text) { return ordered_json::parse(text); }

// Two sampled tokens, 3 most likely each: 'q' (outside the top 3, so last)
// after z, m, a; then 'm' (among them, in its place).
RequestOutput two_tokens() {
  RequestOutput out;
  out.text = "qm";
  out.token_ids = {id('q'), id('m')};
  const std::vector<std::pair<int32_t, float>> top = {
      {id('z'), -0.1f}, {id('m'), -0.7f}, {id('a'), -1.5f}};
  out.logprobs = {TokenLogprob{id('q'), -2.0f, top, 9}, TokenLogprob{id('m'), -0.7f, top, 2}};
  out.finished = true;
  out.finish_reason = FinishReason::kLength;
  out.prompt_tokens = 3;
  out.completion_tokens = 2;
  return out;
}

const std::vector<std::string> kRanked = {"z", "m", "a", "q"};
const std::vector<std::string> kRankedSampledAmongThem = {"z", "m", "a"};

TEST(ProtocolLogprobsOrder, CompletionsTopLogprobsMostLikelyFirst) {
  const ServingModel m = make_test_model();
  const ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "logprobs": 3})", m));
  // Non-streamed: the response body as sent.
  const ordered_json body = reparse(completion_response(r, two_tokens()).dump());
  const ordered_json& top = body["choices"][0]["logprobs"]["top_logprobs"];
  EXPECT_EQ(keys(top[0]), kRanked) << top.dump();
  EXPECT_EQ(keys(top[1]), kRankedSampledAmongThem) << top.dump();
  // Streamed: the SSE chunk.
  ChoiceAssembler a(r);
  StreamFormatter f(r);
  const std::string sse = f.format({a.add(two_tokens())});
  ASSERT_EQ(sse.rfind("data: ", 0), 0u) << sse;
  const ordered_json chunk = reparse(sse.substr(6, sse.find("\n\n") - 6));
  const ordered_json& streamed = chunk["choices"][0]["logprobs"]["top_logprobs"];
  EXPECT_EQ(keys(streamed[0]), kRanked) << chunk.dump();
  // /v1/ws: the delta message.
  ChoiceAssembler ws_a(r);
  const ordered_json msg = reparse(ws_delta_message("x", 1, ws_a.add(two_tokens())));
  EXPECT_EQ(keys(msg["logprobs"]["top_logprobs"][0]), kRanked) << msg.dump();
}

TEST(ProtocolLogprobsOrder, ChatTopLogprobsMostLikelyFirst) {
  const ServingModel m = make_test_model();
  const ParsedRequest r = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "logprobs": true, "top_logprobs": 3})",
      m));
  const ordered_json body = reparse(completion_response(r, two_tokens()).dump());
  const ordered_json& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  std::vector<std::string> tokens;
  for (const ordered_json& t : content[0]["top_logprobs"]) tokens.push_back(t["token"]);
  EXPECT_EQ(tokens, kRankedSampledAmongThem);  // the k most likely only
}

TEST(ProtocolLogprobsOrder, PromptLogprobsMostLikelyFirst) {
  const ServingModel m = make_test_model();
  // Prompt <s> h i: 'h' has rank 4, after z, a, c; 'i' is the most likely.
  std::vector<PromptLogprob> lps = {
      PromptLogprob{id('h'), -1.5f, 4, {{id('z'), -0.1f}, {id('a'), -0.5f}, {id('c'), -0.9f}}},
      PromptLogprob{id('i'), -0.25f, 1, {{id('i'), -0.25f}, {id('b'), -2.0f}, {id('d'), -3.0f}}}};
  const ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "prompt_logprobs": 3})", m));
  RequestOutput out = two_tokens();
  out.logprobs.clear();
  out.prompt_logprobs = lps;
  const ordered_json body = reparse(completion_response(r, out).dump());
  const ordered_json& list = body["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(list.size(), 3u) << list.dump();
  EXPECT_TRUE(list[0].is_null());
  EXPECT_EQ(keys(list[1]),
            (std::vector<std::string>{id_key('z'), id_key('a'), id_key('c'), id_key('h')}))
      << list.dump();
  EXPECT_EQ(list[1][id_key('h')]["rank"], 4);
  EXPECT_EQ(keys(list[2]), (std::vector<std::string>{id_key('i'), id_key('b'), id_key('d')}))
      << list.dump();
  // Echo with logprobs: the prompt's completions-format entries too.
  const ParsedRequest echo =
      parse_ok(parse_completion_request(R"({"prompt": "hi", "echo": true, "logprobs": 3})", m));
  RequestOutput echoed = two_tokens();
  echoed.prompt_logprobs = lps;
  const ordered_json e = reparse(completion_response(echo, echoed).dump());
  const ordered_json& top = e["choices"][0]["logprobs"]["top_logprobs"];
  EXPECT_EQ(keys(top[1]), (std::vector<std::string>{"z", "a", "c", "h"})) << top.dump();
  EXPECT_EQ(keys(top[3]), kRanked) << top.dump();
}

// The offline RequestOutput JSON: a position's map is by token id; its
// JSON object lists the entries by logprob, highest first.
TEST(ProtocolLogprobsOrder, OfflineOutputJsonMostLikelyFirst) {
  offline::RequestOutput out;
  out.prompt_token_ids = {1, id('h')};
  offline::CompletionOutput c;
  c.token_ids = {id('q')};
  offline::PositionLogprobs p;
  p[id('a')] = offline::Logprob{-1.5f, 3, "a"};
  p[id('z')] = offline::Logprob{-0.1f, 1, "z"};
  p[id('m')] = offline::Logprob{-0.7f, 2, "m"};
  p[id('q')] = offline::Logprob{-2.0f, std::nullopt, "q"};
  c.logprobs = std::vector<offline::PositionLogprobs>{p};
  out.outputs.push_back(c);
  out.prompt_logprobs = std::vector<std::optional<offline::PositionLogprobs>>{std::nullopt, p};
  const ordered_json j = reparse(offline::to_json(out).dump());
  const std::vector<std::string> ranked = {id_key('z'), id_key('m'), id_key('a'), id_key('q')};
  EXPECT_EQ(keys(j["outputs"][0]["logprobs"][0]), ranked) << j.dump();
  EXPECT_EQ(keys(j["prompt_logprobs"][1]), ranked) << j.dump();
}

}  // namespace
}  // namespace pagoda
