// Helpers for serving the tiny random models that carry an HF transformers
// reference (shared/models/<dir>/reference.json: chat cases with messages,
// rendered prompt, prompt_ids, greedy_ids, greedy_text; completion cases
// with prompt, prompt_ids, greedy_ids, greedy_text): the request for a case,
// the text the server should return for it, and a stream split into its
// chunks' texts so each can be checked on its own.
#pragma once
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

}  // namespace pagoda::testing_http
