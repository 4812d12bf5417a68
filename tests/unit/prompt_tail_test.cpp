// encode_prompt_tail (server/prompt_tokenizer.h): for truncate_prompt_tokens
// only the text's tail is tokenized. Its ids must be what tokenizing the
// whole text gives (encode_prompt, itself tested against sentencepiece and
// HF tokenizers), cut to the last k, for every tokenizer kind the shared
// assets hold (SentencePiece: stories260K, tiny-random-chinese-llama,
// Llama 2's; byte-level BPE: Qwen2's and Qwen2.5's), on mixed text:
// English, CJK, accents, digits, space and newline runs, tabs, and
// special-token strings.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "server/prompt_tokenizer.h"

namespace pagoda {
namespace {

std::string shared(const std::string& rel) { return std::string(PAGODA_SHARED_DIR) + "/" + rel; }

// The last k ids of encode_prompt's result, BOS kept first and EOS last as
// truncate_prompt_tokens keeps them (server/openai_request.cpp truncate_ids).
std::vector<int32_t> last_k(const std::vector<int32_t>& ids, size_t k, size_t head, size_t tail) {
  if (ids.size() <= k) return ids;
  std::vector<int32_t> out(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(head));
  const auto body_end = ids.end() - static_cast<std::ptrdiff_t>(tail);
  out.insert(out.end(), body_end - static_cast<std::ptrdiff_t>(k - head - tail), ids.end());
  return out;
}

std::string mixed_text(uint32_t seed, size_t bytes, bool specials) {
  static const std::vector<std::string> words = {"Once",
                                                 "upon",
                                                 "a",
                                                 "time",
                                                 "there",
                                                 "was",
                                                 "a",
                                                 "little",
                                                 "girl",
                                                 "named",
                                                 "Lily.",
                                                 "She",
                                                 "liked",
                                                 "to",
                                                 "play",
                                                 "outside,",
                                                 "in",
                                                 "the",
                                                 "sun!",
                                                 "café",
                                                 "naïve",
                                                 "Über",
                                                 "你好",
                                                 "世界",
                                                 "日本語の",
                                                 "テキスト",
                                                 "123",
                                                 "4567",
                                                 "3.14",
                                                 "(x)",
                                                 "don't",
                                                 "we'll",
                                                 "—",
                                                 "«quoted»",
                                                 "e\u0301",
                                                 "\u00e9t\u00e9",
                                                 "emoji\U0001F600",
                                                 "tab\there",
                                                 "a-b_c"};
  static const std::vector<std::string> seps = {" ",    " ",   " ",  " ",  "  ", "\n",
                                                "\n\n", " \n", "\t", ", ", ". "};
  static const std::vector<std::string> special = {"<|im_start|>", "<|im_end|>", "<s>", "</s>"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < bytes) {
    if (specials && rng() % 40 == 0) s += special[rng() % special.size()];
    s += words[rng() % words.size()];
    s += seps[rng() % seps.size()];
  }
  return s;
}

void expect_tail_matches(const std::string& model_dir, bool specials) {
  SCOPED_TRACE(model_dir);
  const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared(model_dir));
  for (bool add_special : {true, false}) {
    const std::vector<int32_t> wrap = encode_prompt(*tok, "", add_special);
    const auto bos = tok->bos_token_id();
    const size_t head = !wrap.empty() && bos && wrap.front() == *bos ? 1 : 0;
    const size_t tail = wrap.size() - head;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const std::string text = mixed_text(seed, 60'000, specials);
      const std::vector<int32_t> full = encode_prompt(*tok, text, add_special);
      for (size_t k : {size_t{3}, size_t{17}, size_t{500}}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " k " + std::to_string(k) +
                     (add_special ? " with specials" : ""));
        const auto got = encode_prompt_tail(*tok, text, add_special, k);
        ASSERT_TRUE(got.has_value());
        // Only the tail was tokenized (fewer ids than the whole text has).
        EXPECT_LT(got->size(), full.size());
        EXPECT_EQ(last_k(*got, k, head, tail), last_k(full, k, head, tail));
      }
    }
  }
}

TEST(PromptTail, SentencePieceStories260K) { expect_tail_matches("models/stories260K", false); }
TEST(PromptTail, SentencePieceChineseLlama) {
  expect_tail_matches("models/tiny-random-chinese-llama", true);
}
TEST(PromptTail, ByteLevelBpeQwen2) { expect_tail_matches("models/tiny-random-qwen2-chat", true); }
// The published tokenizers (32,000 and 151,643-entry vocabularies).
TEST(PromptTail, SentencePieceLlama2) { expect_tail_matches("tokenizers/llama2", true); }
TEST(PromptTail, ByteLevelBpeQwen25) { expect_tail_matches("tokenizers/qwen2.5", true); }

TEST(PromptTail, ShortTextIsTokenizedWhole) {
  const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared("models/stories260K"));
  const std::string text = "Once upon a time there was a little girl.";
  EXPECT_EQ(encode_prompt_tail(*tok, text, true, 4), encode_prompt(*tok, text, true));
}

// No space or newline before text near the end: up to kMaxWholeBytes the
// text is tokenized whole; beyond, refused (nullopt) without tokenizing.
TEST(PromptTail, OneLongWordIsWholeOrRefused) {
  const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared("models/stories260K"));
  const std::string word(100'000, 'a');
  EXPECT_EQ(encode_prompt_tail(*tok, word, false, 8), encode_prompt(*tok, word, false));
  EXPECT_FALSE(
      encode_prompt_tail(*tok, "Once upon " + std::string(kMaxWholeBytes + 1, 'a'), false, 8)
          .has_value());
}

}  // namespace
}  // namespace pagoda
