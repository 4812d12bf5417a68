// /v1/ws runs a request exactly as HTTP does (one request pipeline,
// server/generation_group.h), against the real `pagoda serve` over loopback:
// a list of prompts with n > 1 runs every prompt (choice index
// prompt_index * n + sample_index), logprobs reach the client in the shape
// the SSE chunks carry them, echo puts each prompt first. Each compares the
// socket's joined messages with the HTTP result of the same request
// (greedy: temperature 0).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"
#include "tests/integration/ws_client.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

// One choice's output joined from a stream's messages (WebSocket deltas or
// SSE chunks): text, ids, and the logprob arrays concatenated.
struct Choice {
  std::string text;
  std::vector<int32_t> token_ids;
  json logprobs;                   // null until a message carries some
  std::vector<std::string> texts;  // each message's text, in order
};

void join_logprobs(json& into, const json& part) {
  if (part.is_null()) return;
  if (into.is_null()) into = json::object();
  for (auto it = part.begin(); it != part.end(); ++it)
    for (const json& v : it.value()) into[it.key()].push_back(v);
}

struct WsResult {
  std::map<int, Choice> choices;
  json done;
  bool logprobs_parallel_to_ids = true;  // every delta's logprobs cover exactly its token_ids
};

WsResult ws_request(uint16_t port, const std::string& type, const json& body,
                    const std::string& id) {
  WsClient ws(port);
  json m = body;
  m["type"] = type;
  m["id"] = id;
  ws.send(m);
  WsResult r;
  for (;;) {
    json msg = ws.read();
    EXPECT_EQ(msg["id"], id) << msg.dump();
    if (msg["type"] != "delta") {
      r.done = msg;
      return r;
    }
    Choice& c = r.choices[msg["index"].get<int>()];
    c.text += msg["text"].get<std::string>();
    c.texts.push_back(msg["text"].get<std::string>());
    for (const json& t : msg["token_ids"]) c.token_ids.push_back(t.get<int32_t>());
    if (msg.contains("logprobs")) {
      const json& lp = msg["logprobs"];
      const size_t n = lp.contains("content") ? lp["content"].size() : lp["tokens"].size();
      if (n != msg["token_ids"].size()) r.logprobs_parallel_to_ids = false;
      join_logprobs(c.logprobs, lp);
    }
  }
}

// The SSE stream of the same request, per choice.
std::map<int, Choice> sse_request(uint16_t port, const std::string& path, json body) {
  body["stream"] = true;
  HttpClient c(port);
  HttpResponse r = c.post(path, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  std::map<int, Choice> out;
  for (const std::string& e : sse_payloads(r.body)) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    for (const json& ch : j["choices"]) {
      Choice& o = out[ch["index"].get<int>()];
      if (ch.contains("delta")) {
        if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
          o.text += ch["delta"]["content"].get<std::string>();
      } else {
        o.text += ch["text"].get<std::string>();
      }
      join_logprobs(o.logprobs, ch["logprobs"]);
    }
  }
  return out;
}

// Logprob objects of either wire format: strings, offsets and bytes equal,
// numbers within 1e-4 (one batch's float sums may differ from another's in
// the last bits).
void expect_same_logprobs(const json& a, const json& b, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(a.type(), b.type()) << a.dump() << " vs " << b.dump();
  if (a.is_number_float() || b.is_number_float()) {
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-4);
  } else if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << a.dump() << " vs " << b.dump();
    for (auto it = a.begin(); it != a.end(); ++it) {
      ASSERT_TRUE(b.contains(it.key())) << it.key() << " missing in " << b.dump();
      expect_same_logprobs(it.value(), b[it.key()], where + "." + it.key());
    }
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << a.dump() << " vs " << b.dump();
    for (size_t i = 0; i < a.size(); ++i)
      expect_same_logprobs(a[i], b[i], fmt::format("{}[{}]", where, i));
  } else {
    EXPECT_EQ(a, b);
  }
}

class ServeWebSocketPipeline : public BundledServerSuite<ServeWebSocketPipeline> {};

TEST_F(ServeWebSocketPipeline, APromptListWithNRunsEveryPromptAsOverHttp) {
  // Seeded sampling (n > 1 cannot be greedy): the same choices both ways.
  const json body = {{"prompt", {"Once upon a time", "The little dog", "Lily and Tom"}},
                     {"n", 2},
                     {"max_tokens", 12},
                     {"temperature", 1.0},
                     {"seed", 5},
                     {"ignore_eos", true},
                     {"return_token_ids", true}};
  json http = post_json(port(), "/v1/completions", body);
  ASSERT_EQ(http["choices"].size(), 6u) << http.dump();
  WsResult ws = ws_request(port(), "completion", body, "multi");
  ASSERT_EQ(ws.done["type"], "done") << ws.done.dump();
  ASSERT_EQ(ws.choices.size(), 6u);
  ASSERT_EQ(ws.done["choices"].size(), 6u) << ws.done.dump();
  for (const json& c : http["choices"]) {
    const int i = c["index"];
    SCOPED_TRACE(i);
    EXPECT_EQ(ws.choices[i].text, c["text"].get<std::string>());
    EXPECT_EQ(ws.choices[i].token_ids, c["token_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(ws.done["choices"][i]["index"], i);
    EXPECT_EQ(ws.done["choices"][i]["finish_reason"], c["finish_reason"]);
    EXPECT_EQ(ws.done["choices"][i]["completion_tokens"], 12);
  }
  // Prompts differ, so their choices do: index 0 (prompt 0) != index 2 (prompt 1).
  EXPECT_NE(ws.choices[0].text, ws.choices[2].text);
  EXPECT_EQ(ws.done["usage"], http["usage"]) << ws.done.dump();
}

TEST_F(ServeWebSocketPipeline, CompletionLogprobsReachTheClientAsTheSseChunksCarryThem) {
  const json body = {{"prompt", {"Once upon a time", "The little dog"}},
                     {"logprobs", 3},
                     {"max_tokens", 16},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  json http = post_json(port(), "/v1/completions", body);
  ASSERT_EQ(http["choices"].size(), 2u) << http.dump();
  WsResult ws = ws_request(port(), "completion", body, "lp");
  ASSERT_EQ(ws.done["type"], "done") << ws.done.dump();
  std::map<int, Choice> sse = sse_request(port(), "/v1/completions", body);
  EXPECT_TRUE(ws.logprobs_parallel_to_ids);
  for (const json& c : http["choices"]) {
    const int i = c["index"];
    SCOPED_TRACE(i);
    ASSERT_TRUE(c["logprobs"].is_object()) << c.dump();
    EXPECT_EQ(c["logprobs"]["tokens"].size(), 16u);
    EXPECT_EQ(ws.choices[i].text, c["text"].get<std::string>());
    expect_same_logprobs(ws.choices[i].logprobs, c["logprobs"], "ws vs http");
    expect_same_logprobs(ws.choices[i].logprobs, sse[i].logprobs, "ws vs sse");
  }
}

TEST_F(ServeWebSocketPipeline, EchoPutsEachPromptFirstAsOverHttp) {
  const json body = {{"prompt", {"Once upon a time", "The little dog"}},
                     {"echo", true},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"return_token_ids", true}};
  json http = post_json(port(), "/v1/completions", body);
  ASSERT_EQ(http["choices"].size(), 2u) << http.dump();
  WsResult ws = ws_request(port(), "completion", body, "echo");
  ASSERT_EQ(ws.done["type"], "done") << ws.done.dump();
  std::map<int, Choice> sse = sse_request(port(), "/v1/completions", body);
  const std::string prompts[2] = {"Once upon a time", "The little dog"};
  for (const json& c : http["choices"]) {
    const int i = c["index"];
    SCOPED_TRACE(i);
    const std::string text = c["text"];
    EXPECT_EQ(text.rfind(prompts[i], 0), 0u) << text;  // HTTP: the prompt first
    EXPECT_GT(text.size(), prompts[i].size());
    EXPECT_EQ(ws.choices[i].text, text);
    EXPECT_EQ(sse[i].text, text);
    // The prompt comes with the choice's first tokens (vLLM's streaming);
    // the ids are the completion's only, as HTTP's token_ids.
    ASSERT_FALSE(ws.choices[i].texts.empty());
    EXPECT_EQ(ws.choices[i].texts[0].rfind(prompts[i], 0), 0u) << ws.choices[i].texts[0];
    EXPECT_EQ(ws.choices[i].token_ids, c["token_ids"].get<std::vector<int32_t>>());
  }
  EXPECT_EQ(ws.done["usage"], http["usage"]) << ws.done.dump();
}

// A prompt list is one engine request per prompt: cancel ends all of them
// (each choice's done entry says "abort", none ran to its max_tokens).
TEST_F(ServeWebSocketPipeline, CancelAbortsEveryPromptOfTheRequest) {
  WsClient ws(port());
  ws.send({{"type", "completion"},
           {"id", "cancel-all"},
           {"prompt", {"Once upon a time", "The little dog"}},
           {"n", 2},
           {"max_tokens", 480},
           {"temperature", 1.0},
           {"ignore_eos", true}});
  json first = ws.read();
  ASSERT_EQ(first["type"], "delta") << first.dump();
  ws.send({{"type", "cancel"}, {"id", "cancel-all"}});
  json done;
  for (done = ws.read(); done["type"] == "delta"; done = ws.read()) {
  }
  ASSERT_EQ(done["type"], "done") << done.dump();
  ASSERT_EQ(done["choices"].size(), 4u) << done.dump();
  for (const json& c : done["choices"]) {
    EXPECT_EQ(c["finish_reason"], "abort") << done.dump();
    EXPECT_LT(c["completion_tokens"].get<int>(), 480) << done.dump();
  }
}

// A prompt list's stream is one log over all its engine requests: a resume
// after a forced disconnect yields exactly what each choice missed.
TEST_F(ServeWebSocketPipeline, APromptListResumesAfterADisconnectWithNothingLostPerChoice) {
  const json body = {{"prompt", {"Once upon a time", "The little dog"}},
                     {"max_tokens", 150},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"return_token_ids", true}};
  json http = post_json(port(), "/v1/completions", body);
  ASSERT_EQ(http["choices"].size(), 2u) << http.dump();
  std::map<int, Choice> got;
  int64_t last_seq = 0;
  {
    WsClient ws(port());
    json m = body;
    m["type"] = "completion";
    m["id"] = "resume-list";
    ws.send(m);
    while (last_seq < 6) {
      json d = ws.read();
      ASSERT_EQ(d["type"], "delta") << d.dump();
      last_seq = d["seq"];
      Choice& c = got[d["index"].get<int>()];
      c.text += d["text"].get<std::string>();
      for (const json& t : d["token_ids"]) c.token_ids.push_back(t.get<int32_t>());
    }
    ws.drop();  // no close frame: the stream stays resumable
  }
  WsClient ws2(port());
  ws2.send({{"type", "resume"}, {"id", "resume-list"}, {"after", last_seq}});
  json done;
  for (json d = ws2.read();; d = ws2.read()) {
    if (d["type"] != "delta") {
      done = d;
      break;
    }
    EXPECT_GT(d["seq"].get<int64_t>(), last_seq) << d.dump();
    last_seq = d["seq"];
    Choice& c = got[d["index"].get<int>()];
    c.text += d["text"].get<std::string>();
    for (const json& t : d["token_ids"]) c.token_ids.push_back(t.get<int32_t>());
  }
  ASSERT_EQ(done["type"], "done") << done.dump();
  for (const json& c : http["choices"]) {
    const int i = c["index"];
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].text, c["text"].get<std::string>());
    EXPECT_EQ(got[i].token_ids, c["token_ids"].get<std::vector<int32_t>>());
  }
  EXPECT_EQ(done["usage"], http["usage"]) << done.dump();
}

// Chat logprobs / top_logprobs, on a model with a chat template (a
// random-weight Qwen2, ../shared).
TEST(ServeWebSocketPipelineChat, ChatLogprobsReachTheClientAsTheSseChunksCarryThem) {
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--network-threads", "2"});
  const json body = {
      {"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
      {"logprobs", true},
      {"top_logprobs", 2},
      {"max_tokens", 12},
      {"temperature", 0},
      {"ignore_eos", true}};
  json http = post_json(server.port(), "/v1/chat/completions", body);
  const json& c = http["choices"][0];
  ASSERT_EQ(c["logprobs"]["content"].size(), 12u) << http.dump();
  WsResult ws = ws_request(server.port(), "chat", body, "chatlp");
  ASSERT_EQ(ws.done["type"], "done") << ws.done.dump();
  std::map<int, Choice> sse = sse_request(server.port(), "/v1/chat/completions", body);
  EXPECT_TRUE(ws.logprobs_parallel_to_ids);
  EXPECT_EQ(ws.choices[0].text, c["message"]["content"].get<std::string>());
  expect_same_logprobs(ws.choices[0].logprobs, c["logprobs"], "ws vs http");
  expect_same_logprobs(ws.choices[0].logprobs, sse[0].logprobs, "ws vs sse");
  EXPECT_EQ(ws.choices[0].logprobs["content"][0]["top_logprobs"].size(), 2u);
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace pagoda::testing_http
