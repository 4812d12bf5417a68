// POST /tokenize on the real `pagoda serve` (bundled stories260K, its
// tok512 SentencePiece model) against sentencepiece's own output
// (shared/testvectors/tokenizer_encodings.json, "tok512 (stories260K)":
// SentencePieceProcessor.encode ids and pieces): with return_token_strs the
// token strings are the vocabulary pieces (vLLM: convert_ids_to_tokens).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeTokenize : public BundledServerSuite<ServeTokenize> {};

TEST_F(ServeTokenize, ReturnTokenStrsGivesSentencepiecesPieces) {
  const json cases = read_json_file(shared_path("testvectors/tokenizer_encodings.json"))["tok512 (stories260K)"]["cases"];
  size_t checked = 0;
  for (const json& c : cases) {
    if (c["ids"].empty()) continue;  // an empty prompt is a 400, as on /v1/completions
    const std::string text = c["text"];
    // Inputs with repeated spaces: the bundled tokenizer.model collapses them
    // (remove_extra_whitespaces) as this reference's did; compare all.
    SCOPED_TRACE(text);
    json r = post_json(port(), "/tokenize", {{"prompt", text}, {"add_special_tokens", false}, {"return_token_strs", true}});
    EXPECT_EQ(r["tokens"], c["ids"]);
    EXPECT_EQ(r["token_strs"], c["pieces"]);
    EXPECT_EQ(r["count"], c["ids"].size());
    ++checked;
  }
  EXPECT_GE(checked, 15u);
  // With BOS added, its piece is "<s>"; without the flag token_strs is null.
  json bos = post_json(port(), "/tokenize", {{"prompt", "Once upon a time"}, {"return_token_strs", true}});
  EXPECT_EQ(bos["token_strs"], (json{"<s>", "\xE2\x96\x81Once", "\xE2\x96\x81upon", "\xE2\x96\x81" "a", "\xE2\x96\x81time"}));
  json plain = post_json(port(), "/tokenize", {{"prompt", "Once upon a time"}});
  EXPECT_TRUE(plain["token_strs"].is_null()) << plain.dump();
  EXPECT_EQ(plain["tokens"], (json{1, 403, 407, 261, 378}));
}

}  // namespace
}  // namespace pagoda::testing_http
