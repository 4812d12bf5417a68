// Tool calls on the response side: a chat request with a tool parser
// (ParsedRequest::tool_parser) through ChoiceAssembler, the non-streamed
// chat.completion and the SSE chunks, fed canned engine deltas (the text a
// Qwen2.5 model writes, in token-sized pieces).
#include <gtest/gtest.h>

#include "server/openai_response.h"
#include "sse_test_util.h"

namespace pagoda {
namespace {

using nlohmann::json;

ParsedRequest chat_req(ToolParserKind parser) {
  ParsedRequest r;
  r.kind = ApiKind::kChat;
  r.request_id = "chatcmpl-abc";
  r.created = 1700000000;
  r.model = "qwen";
  r.prompt_token_ids = {1, 2, 3};
  r.stream = true;
  r.tool_parser = parser;
  return r;
}

// The non-streamed response: every delta through the assembler, then its
// choices (what GenerationGroup hands completion_response).
json whole(const ParsedRequest& req, const std::vector<RequestOutput>& ds) {
  ChoiceAssembler a(req);
  for (const RequestOutput& d : ds) a.add(d);
  return completion_response(req, a.choices());
}

std::vector<RequestOutput> deltas(const std::vector<std::string>& pieces,
                                  FinishReason why = FinishReason::kStop) {
  std::vector<RequestOutput> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    RequestOutput d;
    d.text = pieces[i];
    d.token_ids = {static_cast<int32_t>(100 + i)};
    d.prompt_tokens = 3;
    d.completion_tokens = static_cast<int64_t>(i + 1);
    d.finished = i + 1 == pieces.size();
    d.finish_reason = d.finished ? why : FinishReason::kNone;
    out.push_back(std::move(d));
  }
  return out;
}

const std::vector<std::string> kPieces = {
    "I will check.", "\n",  "<tool_call>", "\n{\"",     "name",        "\":",  " \"",
    "get_weather",   "\",", " \"",         "arguments", "\":",         " {\"", "city",
    "\":",           " \"", "Paris",       "\"}}\n",    "</tool_call>"};

TEST(ProtocolToolCalls, NonStreamedMessage) {
  ParsedRequest req = chat_req(ToolParserKind::kHermes);
  json j = whole(req, deltas(kPieces));
  const json& c = j["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], "I will check.\n");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(call["id"].get<std::string>().size(), 14u + 32u);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"],
            (json{{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}));
  EXPECT_FALSE(call.contains("index"));
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(kPieces.size()));
}

TEST(ProtocolToolCalls, OnlyACallHasNullContentAndLengthStaysToolCalls) {
  ParsedRequest req = chat_req(ToolParserKind::kHermes);
  // Cut by max_tokens after the JSON closed, before </tool_call>: vLLM's
  // regex takes the unterminated block and its JSON parses, so a call.
  std::vector<std::string> pieces(kPieces.begin() + 2, kPieces.end() - 1);
  json c = whole(req, deltas(pieces, FinishReason::kLength))["choices"][0];
  EXPECT_TRUE(c["message"]["content"].is_null());
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(c["finish_reason"], "tool_calls");  // vLLM: once a call was parsed
}

using testing_sse::sse_chunks;

// Cut by max_tokens inside the arguments: the JSON never closed, so no call
// (vLLM's json.loads fails and the output is content, with the engine's
// finish_reason). Non-streamed: the text is content, tool_calls [],
// "length". Streamed: the name and argument deltas already went out and
// stay; the last chunk says "length", not "tool_calls", and no content
// repeats the call's text.
TEST(ProtocolToolCalls, CallCutOffBeforeItsJsonClosedIsContentWithTheEnginesReason) {
  ParsedRequest req = chat_req(ToolParserKind::kHermes);
  const std::vector<std::string> pieces(kPieces.begin(), kPieces.end() - 2);
  std::string text;
  for (const std::string& p : pieces) text += p;
  json c = whole(req, deltas(pieces, FinishReason::kLength))["choices"][0];
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(c["message"]["tool_calls"], json::array());
  EXPECT_EQ(c["message"]["content"], text);
  // A stop string inside the block: "stop".
  json s = whole(req, deltas(pieces, FinishReason::kStop))["choices"][0];
  EXPECT_EQ(s["finish_reason"], "stop");
  EXPECT_EQ(s["message"]["content"], text);

  ChoiceAssembler a(req);
  StreamFormatter f(req);
  std::string sse = f.begin();
  for (const RequestOutput& d : deltas(pieces, FinishReason::kLength)) sse += f.format({a.add(d)});
  std::vector<json> chunks = sse_chunks(sse);
  ASSERT_FALSE(chunks.empty());
  std::string content;
  int names = 0;
  for (const json& ch : chunks) {
    const json& delta = ch["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string())
      content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls"))
      for (const json& t : delta["tool_calls"]) names += t["function"].contains("name") ? 1 : 0;
  }
  EXPECT_EQ(names, 1) << "the name went out before the cut";
  EXPECT_EQ(content, "I will check.\n");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length") << sse;
  // The assembler's whole choice (what /v1/ws's done message and the Python
  // LLM read) agrees with the non-streamed response.
  EXPECT_EQ(a.choices()[0].text, text);
  EXPECT_EQ(a.choices()[0].tool_calls, json::array());
  EXPECT_STREQ(finish_reason_name(a.choices()[0]), "length");
}

TEST(ProtocolToolCalls, WithoutParserTheTextIsContent) {
  ParsedRequest req = chat_req(ToolParserKind::kNone);
  json c = whole(req, deltas(kPieces))["choices"][0];
  std::string all;
  for (const std::string& p : kPieces) all += p;
  EXPECT_EQ(c["message"]["content"], all);
  EXPECT_EQ(c["message"]["tool_calls"], json::array());
  EXPECT_EQ(c["finish_reason"], "stop");
}

TEST(ProtocolToolCalls, StreamedChunks) {
  ParsedRequest req = chat_req(ToolParserKind::kHermes);
  ChoiceAssembler a(req);
  StreamFormatter f(req);
  std::string sse = f.begin();
  // One engine delta at a time, as a fast reader gets them.
  for (const RequestOutput& d : deltas(kPieces)) sse += f.format({a.add(d)});
  std::vector<json> chunks = sse_chunks(sse);
  ASSERT_GE(chunks.size(), 4u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  std::string content, args;
  std::vector<json> calls;
  for (const json& c : chunks) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content") && !delta.contains("role")) content += delta["content"];
    if (delta.contains("tool_calls"))
      for (const json& t : delta["tool_calls"]) calls.push_back(t);
  }
  EXPECT_EQ(content, "I will check.\n");
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], "");
  EXPECT_TRUE(calls[0].contains("id"));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i], (json{{"index", 0},
                              {"function", {{"arguments", calls[i]["function"]["arguments"]}}}}));
    args += calls[i]["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(args, "{\"city\": \"Paris\"}");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  // Every argument piece went out as its token arrived: one chunk each.
  EXPECT_EQ(calls.size(), 1u + 6u);  // the name, then {"  city  ":  (space)"  Paris  "}
}

// A <tool_call> block that does not parse is content, and no call was made:
// finish_reason "stop" both streamed and not (vLLM: "tool_calls" only when
// calls were parsed). The non-streamed choice had kept "tool_calls" from the
// deltas while the block was open.
TEST(ProtocolToolCalls, UnparsedCallBlockIsContentAndStop) {
  ParsedRequest req = chat_req(ToolParserKind::kHermes);
  const std::vector<std::string> pieces = {"Sure.", "<tool_call>", "not ", "json", "</tool_call>"};
  json c = whole(req, deltas(pieces))["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["message"]["tool_calls"], json::array());
  EXPECT_EQ(c["message"]["content"], "Sure.<tool_call>not json</tool_call>");
  // Cut inside the block (max_tokens): the same, with "length".
  const std::vector<std::string> cut(pieces.begin(), pieces.end() - 1);
  json l = whole(req, deltas(cut, FinishReason::kLength))["choices"][0];
  EXPECT_EQ(l["finish_reason"], "length");
  EXPECT_EQ(l["message"]["content"], "Sure.<tool_call>not json");
  // Streamed: the last chunk says "stop" too.
  ChoiceAssembler a(req);
  StreamFormatter f(req);
  std::string sse = f.begin();
  for (const RequestOutput& d : deltas(pieces)) sse += f.format({a.add(d)});
  EXPECT_NE(sse.find("\"finish_reason\":\"stop\""), std::string::npos) << sse;
  EXPECT_EQ(sse.find("tool_calls\":["), std::string::npos) << sse;
  // A good call after a bad block still counts.
  std::vector<std::string> both = pieces;
  both.insert(both.end(), kPieces.begin() + 2, kPieces.end());
  json g = whole(req, deltas(both))["choices"][0];
  EXPECT_EQ(g["finish_reason"], "tool_calls");
  EXPECT_EQ(g["message"]["tool_calls"].size(), 1u);
}

}  // namespace
}  // namespace pagoda
