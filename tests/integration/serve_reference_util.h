// Helpers for serving the tiny random models that carry an HF transformers
// reference (shared/models/<dir>/reference.json: chat cases with messages,
// rendered prompt, prompt_ids, greedy_ids, greedy_text; completion cases
// with prompt, prompt_ids, greedy_ids, greedy_text): the request for a case,
// the text the server should return for it, a stream split into its
// chunks' texts so each can be checked on its own, a fixture serving one
// model, and the checks of one chat / completion case.
#pragma once
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/integration/serve_test_util.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda::testing_http {

inline std::string model_path(const std::string& name) { return shared_path("models/" + name); }

// The server's arguments for a reference model: float32 as the reference
// was made (weights upcast from bf16), served under `name`.
inline std::vector<std::string> reference_server_args(const std::string& dir, const std::string& name) {
  return {model_path(dir), "--served-model-name", name, "--dtype", "float32", "--max-model-len", "512"};
}

// The text a served completion of `greedy_ids` has. The reference's
// greedy_text is HF decode(greedy_ids), which drops the first piece's
// SentencePiece "▁" (nothing precedes it); the server decodes generated
// tokens in the prompt's context (vLLM's incremental detokenizer, HF's
// pipeline return_full_text=False), where that "▁" is a space. Byte-level
// BPE has no such prefix: the two are the same.
inline std::string served_text(const Tokenizer& tok, const nlohmann::json& c) {
  std::string want = c.at("greedy_text").get<std::string>();
  const auto greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
  if (!greedy.empty() && tok.id_to_piece(greedy[0]).rfind("\xE2\x96\x81", 0) == 0) want = " " + want;
  return want;
}

// A streamed response's text deltas, one per chunk with a choice, in order.
struct StreamChunks {
  int status = 0;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_ids;  // per chunk, with return_token_ids
  std::string joined;
  bool done = false;
  nlohmann::json usage;
  std::string error_body;
};

inline StreamChunks stream_chunks(uint16_t port, const std::string& path, nlohmann::json body) {
  body["stream"] = true;
  HttpClient client(port);
  HttpResponse r = client.post(path, body.dump());
  StreamChunks s;
  s.status = r.status;
  if (r.status != 200) {
    s.error_body = r.body;
    return s;
  }
  for (const std::string& e : sse_payloads(r.body)) {
    // Each event's bytes as sent must be valid UTF-8 (a JSON text is).
    EXPECT_TRUE(test::is_valid_utf8(e)) << e;
    if (e == "[DONE]") {
      s.done = true;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(e);
    if (j.contains("usage") && !j["usage"].is_null()) s.usage = j["usage"];
    if (j["choices"].empty()) continue;
    const nlohmann::json& c = j["choices"][0];
    std::string t;
    if (c.contains("delta")) {
      if (c["delta"].contains("content") && c["delta"]["content"].is_string()) t = c["delta"]["content"];
    } else {
      t = c["text"];
    }
    s.texts.push_back(t);
    s.token_ids.emplace_back();
    if (c.contains("token_ids") && c["token_ids"].is_array()) s.token_ids.back() = c["token_ids"].get<std::vector<int32_t>>();
    s.joined += t;
  }
  return s;
}

// Every chunk's text is whole UTF-8 and holds no U+FFFD (a character split
// over several tokens comes out whole, in one chunk).
inline void expect_whole_characters(const StreamChunks& s) {
  for (size_t i = 0; i < s.texts.size(); ++i) {
    EXPECT_TRUE(test::is_valid_utf8(s.texts[i])) << "chunk " << i;
    EXPECT_EQ(s.texts[i].find(test::kReplacement), std::string::npos) << "chunk " << i << ": " << s.texts[i];
  }
}

// A test suite against one reference model served for the whole suite.
// Model gives kDir (under shared/models) and kName (--served-model-name).
template <class Model>
class ServeReferenceModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer(reference_server_args(Model::kDir, Model::kName));
    tok_ = load_tokenizer(model_path(Model::kDir));
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
    server_ = nullptr;
    tok_.reset();
  }
  static uint16_t port() { return server_->port(); }
  static nlohmann::json reference() { return read_json_file(model_path(Model::kDir) + "/reference.json"); }
  inline static PagodaServer* server_ = nullptr;
  inline static std::shared_ptr<Tokenizer> tok_;
};

// One reference chat case c through /v1/chat/completions, greedy for
// len(greedy_ids) tokens: the prompt ids and their count, the greedy ids,
// completion_tokens, the text, finish_reason "length"; streamed: [DONE],
// whole characters in every chunk, the same text.
inline void expect_chat_case_matches(uint16_t port, const Tokenizer& tok, const nlohmann::json& c) {
  const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
  nlohmann::json body = {{"messages", c["messages"]},
                         {"max_tokens", greedy.size()},
                         {"temperature", 0},
                         {"return_token_ids", true}};
  nlohmann::json r = post_json(port, "/v1/chat/completions", body);
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt_ids.size());
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), prompt_ids);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), greedy);
  EXPECT_EQ(r["choices"][0]["message"]["content"], served_text(tok, c));
  EXPECT_EQ(r["usage"]["completion_tokens"], greedy.size());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");

  StreamChunks s = stream_chunks(port, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_TRUE(s.done);
  expect_whole_characters(s);
  EXPECT_EQ(s.joined, served_text(tok, c));
}

// One reference completion case c through /v1/completions with `prompt`
// (c["prompt"], or the reference's prompt_ids where the text tokenizes
// differently): the prompt ids and their count, the greedy ids, the text;
// streamed: whole characters in every chunk, the same text.
inline void expect_completion_case_matches(uint16_t port, const Tokenizer& tok, const nlohmann::json& c,
                                           const nlohmann::json& prompt) {
  const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", greedy.size()}, {"temperature", 0}, {"return_token_ids", true}};
  nlohmann::json r = post_json(port, "/v1/completions", body);
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt_ids.size());
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), prompt_ids);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), greedy);
  EXPECT_EQ(r["choices"][0]["text"], served_text(tok, c));

  StreamChunks s = stream_chunks(port, "/v1/completions", body);
  ASSERT_EQ(s.status, 200) << s.error_body;
  expect_whole_characters(s);
  EXPECT_EQ(s.joined, r["choices"][0]["text"].get<std::string>());
}

}  // namespace pagoda::testing_http
