// --enable-prompt-tokens-details (vLLM's flag) on the real `pagoda serve`:
// usage carries "prompt_tokens_details": {"cached_tokens": N}, the prompt
// tokens read from the prefix cache (vLLM v1's num_cached_tokens), non-
// streamed and in the streamed usage chunk, each prompt counted once.
// Blocks of 16 tokens: a prompt sent again reads its full blocks and, from
// the earlier run's partly filled last block, all but its last token
// (scheduler.h); vLLM reads full blocks only.
// Without the flag usage has no such field (ServeCompletions checks usage
// exactly).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServePromptTokensDetails : public BundledServerSuite<ServePromptTokensDetails> {
 public:
  static std::vector<std::string> server_args() {
    return {std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--chat-template",
            shared_path("chat_templates/llama-2-chat.jinja"), "--enable-prompt-tokens-details"};
  }
};

// `n` token ids from `first` (stories260K has 512 tokens; 3.. are text).
std::vector<int32_t> ids(int32_t first, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

json post_json(uint16_t port, const std::string& path, const json& body) {
  HttpClient c(port);
  HttpResponse r = c.post(path, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body);
}

TEST_F(ServePromptTokensDetails, RepeatedPromptReportsItsCachedBlocks) {
  const json body = {{"prompt", ids(100, 40)}, {"max_tokens", 2}, {"temperature", 0}};
  const json first = post_json(port(), "/v1/completions", body);
  EXPECT_EQ(first["usage"]["prompt_tokens"], 40);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"], (json{{"cached_tokens", 0}}));
  // 2 full blocks, and 7 of the 9 computed tokens of the first run's third
  // block (8 prompt tokens and its first output token): all but the last.
  const json second = post_json(port(), "/v1/completions", body);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"], (json{{"cached_tokens", 39}}));
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);

  // Streamed: the usage chunk carries it too.
  json s = body;
  s["stream"] = true;
  s["stream_options"] = {{"include_usage", true}};
  HttpClient c(port());
  HttpResponse r = c.post("/v1/completions", s.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json usage;
  for (const std::string& e : sse_payloads(r.body))
    if (e != "[DONE]") {
      const json j = json::parse(e);
      if (!j["usage"].is_null()) usage = j["usage"];
    }
  EXPECT_EQ(usage["prompt_tokens_details"], (json{{"cached_tokens", 39}})) << r.body;
}

// cache_salt goes from the request to the prefix cache: a prompt sent again
// with another salt (or none) reads nothing cached; with its own salt it
// reads what the salted run left, as an unsalted repeat does.
TEST_F(ServePromptTokensDetails, CacheSaltSeparatesTheCachedPrefixes) {
  const json base = {{"prompt", ids(400, 40)}, {"max_tokens", 2}, {"temperature", 0}};
  const auto cached = [&](const char* salt) {
    json b = base;
    if (salt) b["cache_salt"] = salt;
    const json r = post_json(port(), "/v1/completions", b);
    return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_EQ(cached("tenant-b"), 0);
  EXPECT_EQ(cached(nullptr), 0);
  EXPECT_EQ(cached("tenant-a"), 39);
  EXPECT_EQ(cached("tenant-b"), 39);
  EXPECT_EQ(cached(nullptr), 39);
  // Chat too.
  const json chat = {
      {"messages", {{{"role", "user"}, {"content", "Tell me about the salty sea."}}}},
      {"max_tokens", 1},
      {"temperature", 0},
      {"cache_salt", "tenant-c"}};
  post_json(port(), "/v1/chat/completions", chat);
  json other = chat;
  other["cache_salt"] = "tenant-d";
  EXPECT_EQ(post_json(port(), "/v1/chat/completions",
                      other)["usage"]["prompt_tokens_details"]["cached_tokens"],
            0);
  EXPECT_GT(post_json(port(), "/v1/chat/completions",
                      chat)["usage"]["prompt_tokens_details"]["cached_tokens"],
            0);
}

TEST_F(ServePromptTokensDetails, EachPromptCountedOnceAcrossChoicesAndPrompts) {
  // Prompt A (48 ids, 3 full blocks once run; the last one's tokens are
  // needed up to the last but one, and a full block serves whole-block hits
  // only: 32), prompt B (20 ids: 1 full block and 3 of the 4 tokens of the
  // partial one: 19).
  const std::vector<int32_t> a = ids(200, 48), b = ids(300, 20);
  post_json(port(), "/v1/completions", {{"prompt", json::array({a, b})}, {"max_tokens", 1}});
  const json r = post_json(
      port(), "/v1/completions",
      {{"prompt", json::array({a, b})}, {"max_tokens", 3}, {"n", 2}, {"temperature", 1.0}});
  ASSERT_EQ(r["choices"].size(), 4u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 68);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"], (json{{"cached_tokens", 32 + 19}}));
}

TEST_F(ServePromptTokensDetails, ChatRepeatedConversationReadsTheCache) {
  const json body = {
      {"messages",
       {{{"role", "system"},
         {"content", "You are a storyteller who tells short stories about a cat and a dog."}},
        {{"role", "user"}, {"content", "Tell me a story about the little cat and the big dog."}}}},
      {"max_tokens", 1},
      {"temperature", 0}};
  const json first = post_json(port(), "/v1/chat/completions", body);
  const json second = post_json(port(), "/v1/chat/completions", body);
  const int64_t prompt = first["usage"]["prompt_tokens"];
  ASSERT_GT(prompt, 16);
  // The first run computed its P prompt tokens: all but the last are read
  // back, unless P ends a block (then the full blocks before that one).
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"],
            prompt % 16 != 0 ? prompt - 1 : prompt - 16);
}

}  // namespace
}  // namespace pagoda::testing_http
