// Protocol layer, response side: deltas → OpenAI JSON / SSE chunks.
#include <gtest/gtest.h>

#include "server/openai_response.h"

namespace pagoda {
namespace {

using nlohmann::json;

ParsedRequest make_req(ApiKind kind, bool stream = false, bool usage = false) {
  ParsedRequest r;
  r.kind = kind;
  r.request_id = kind == ApiKind::kChat ? "chatcmpl-abc" : "cmpl-abc";
  r.created = 1700000000;
  r.model = "tiny";
  r.prompt_token_ids = {1, 2, 3};
  r.stream = stream;
  r.include_usage = usage;
  return r;
}

RequestOutput delta(const char* text, bool finished = false, FinishReason why = FinishReason::kNone,
                    int64_t completion_tokens = 0) {
  RequestOutput d;
  d.text.assign(text);
  d.finished = finished;
  d.finish_reason = why;
  d.prompt_tokens = 3;
  d.completion_tokens = completion_tokens;
  return d;
}

// Engine deltas through the request pipeline's assembler, as
// GenerationGroup::drain() hands them to the formatter.
struct Assembled {
  explicit Assembled(const ParsedRequest& req) : a(req) {}
  std::vector<ChoiceDelta> operator()(const std::vector<RequestOutput>& ds) {
    std::vector<ChoiceDelta> out;
    for (const RequestOutput& d : ds) out.push_back(a.add(d));
    return out;
  }
  ChoiceAssembler a;
};

// Splits SSE text into its `data:` payloads; checks the framing.
std::vector<std::string> sse_payloads(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    EXPECT_EQ(s.compare(pos, 6, "data: "), 0) << s.substr(pos);
    size_t end = s.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    out.push_back(s.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

TEST(ProtocolResponse, TextCompletionObject) {
  ParsedRequest req = make_req(ApiKind::kCompletion);
  RequestOutput out = delta(", there was", true, FinishReason::kLength, 4);
  json j = completion_response(req, out);
  EXPECT_EQ(j["id"], "cmpl-abc");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], ", there was");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 3}, {"completion_tokens", 4}, {"total_tokens", 7}}));
}

TEST(ProtocolResponse, ChatCompletionObjectWithStopReason) {
  ParsedRequest req = make_req(ApiKind::kChat);
  RequestOutput out = delta("Hello", true, FinishReason::kStop, 2);
  out.stop_str = "\n\n";
  json j = completion_response(req, out);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"],
            (json{{"role", "assistant"}, {"content", "Hello"}, {"tool_calls", json::array()}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "\n\n");
  RequestOutput by_id = delta("", true, FinishReason::kStop, 1);
  by_id.stop_token_id = 7;
  EXPECT_EQ(completion_response(req, by_id)["choices"][0]["stop_reason"], 7);
}

TEST(ProtocolResponse, CompletionStreamChunksThenDone) {
  ParsedRequest req = make_req(ApiKind::kCompletion, true);
  StreamFormatter f(req);
  Assembled as(req);
  EXPECT_EQ(f.begin(), "");
  auto p1 = sse_payloads(f.format(as({delta("Once", false, FinishReason::kNone, 1)})));
  ASSERT_EQ(p1.size(), 1u);
  json c1 = json::parse(p1[0]);
  EXPECT_EQ(c1["object"], "text_completion");
  EXPECT_EQ(c1["id"], "cmpl-abc");
  EXPECT_EQ(c1["choices"][0]["text"], "Once");
  EXPECT_TRUE(c1["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(c1.contains("usage"));  // only with include_usage
  EXPECT_FALSE(f.done());
  auto p2 = sse_payloads(f.format(as({delta(" upon", true, FinishReason::kLength, 2)})));
  ASSERT_EQ(p2.size(), 2u);
  json c2 = json::parse(p2[0]);
  EXPECT_EQ(c2["choices"][0]["text"], " upon");
  EXPECT_EQ(c2["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(p2[1], "[DONE]");
  EXPECT_TRUE(f.done());
  EXPECT_EQ(f.format(as({delta("late")})), "");  // nothing after [DONE]
}

TEST(ProtocolResponse, PendingDeltasCoalesceIntoOneChunk) {
  ParsedRequest req = make_req(ApiKind::kCompletion, true);
  StreamFormatter f(req);
  Assembled as(req);
  auto p = sse_payloads(f.format(
      as({delta("a", false, FinishReason::kNone, 1), delta("b", false, FinishReason::kNone, 2),
          delta("c", false, FinishReason::kNone, 3)})));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(json::parse(p[0])["choices"][0]["text"], "abc");
}

TEST(ProtocolResponse, ChatStreamRoleFirstUsageLast) {
  ParsedRequest req = make_req(ApiKind::kChat, true, true);
  StreamFormatter f(req);
  Assembled as(req);
  auto p0 = sse_payloads(f.begin());
  ASSERT_EQ(p0.size(), 1u);
  json c0 = json::parse(p0[0]);
  EXPECT_EQ(c0["object"], "chat.completion.chunk");
  EXPECT_EQ(c0["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(c0.contains("usage") && c0["usage"].is_null());
  RequestOutput last = delta("!", true, FinishReason::kStop, 2);
  last.stop_token_id = 2;
  auto p = sse_payloads(f.format(as({delta("Hi", false, FinishReason::kNone, 1), last})));
  ASSERT_EQ(p.size(), 3u);
  json c1 = json::parse(p[0]);
  EXPECT_EQ(c1["choices"][0]["delta"], (json{{"content", "Hi!"}}));
  EXPECT_EQ(c1["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c1["choices"][0]["stop_reason"], 2);
  json u = json::parse(p[1]);
  EXPECT_EQ(u["choices"], json::array());
  EXPECT_EQ(u["usage"], (json{{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
  EXPECT_EQ(p[2], "[DONE]");
}

TEST(ProtocolResponse, FinishWithoutTextStillSendsFinalChunk) {
  ParsedRequest req = make_req(ApiKind::kChat, true);
  StreamFormatter f(req);
  Assembled as(req);
  auto p = sse_payloads(f.format(as({delta("", true, FinishReason::kAbort, 0)})));
  ASSERT_EQ(p.size(), 2u);
  json c = json::parse(p[0]);
  EXPECT_EQ(c["choices"][0]["delta"], json::object());
  EXPECT_EQ(c["choices"][0]["finish_reason"], "abort");
}

TEST(ProtocolResponse, EngineErrorBecomesErrorEventThenDone) {
  ParsedRequest req = make_req(ApiKind::kCompletion, true);
  StreamFormatter f(req);
  Assembled as(req);
  RequestOutput bad = delta("", true, FinishReason::kAbort);
  bad.error = "prompt does not fit the KV cache";
  auto p = sse_payloads(f.format(as({bad})));
  ASSERT_EQ(p.size(), 2u);
  json e = json::parse(p[0]);
  EXPECT_EQ(e["error"]["message"], "prompt does not fit the KV cache");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_EQ(p[1], "[DONE]");
  EXPECT_EQ(error_for_output(bad).status, 400);
}

}  // namespace
}  // namespace pagoda
