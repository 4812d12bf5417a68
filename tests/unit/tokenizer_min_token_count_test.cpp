// Tokenizer::min_token_count: a lower bound, never more than the real count,
// on the reference texts and on texts built to shrink under tokenization
// (long whitespace runs, repeated pieces, special-token text, invalid
// UTF-8, Hangul jamo that NFC composes); and an actual bound (> 0) for the
// tokenizers whose vocabulary and normalizer prove one.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::read_json;
using test::shared_path;

struct Case {
  const char* dir;
  const char* vectors;  // key in tokenizer_encodings.json
  bool bounded;         // whether min_token_count proves anything
};

std::vector<std::string> texts_for(const Case& c) {
  std::vector<std::string> texts;
  const auto vectors = read_json(shared_path("testvectors/tokenizer_encodings.json"));
  for (const auto& tc : vectors.at(c.vectors).at("cases"))
    texts.push_back(tc.at("text").get<std::string>());
  std::string all;
  for (const auto& t : texts) all += t + "\n";
  texts.push_back(all);
  texts.push_back(std::string(5000, ' '));
  texts.push_back(std::string(5000, '\n'));
  texts.push_back(std::string(5000, '\t'));
  texts.push_back(std::string(2000, ' ') + std::string(2000, '\n') + " \t \r\n x  \f\v");
  texts.push_back(std::string(5000, 'a'));
  std::string eqs;
  for (int i = 0; i < 500; ++i) eqs += "================ the the the ";
  texts.push_back(eqs);
  std::string specials;
  for (int i = 0; i < 300; ++i) specials += "<s></s><unk><|im_start|><|endoftext|>";
  texts.push_back(specials);
  std::string jamo;  // U+1100 U+1161 U+11A8: NFC composes each triple into one syllable
  for (int i = 0; i < 300; ++i) jamo += "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8";
  texts.push_back(jamo);
  std::string cjk;
  for (int i = 0; i < 300; ++i) cjk += "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C";  // 你好，
  texts.push_back(cjk);
  return texts;
}

class MinTokenCount : public ::testing::TestWithParam<Case> {};

TEST_P(MinTokenCount, NeverAboveTheRealCount) {
  const Case& c = GetParam();
  const auto tok = load_tokenizer(shared_path(c.dir));
  size_t bounded_texts = 0;
  for (const std::string& text : texts_for(c)) {
    const size_t bound = tok->min_token_count(text);
    EXPECT_LE(bound, tok->encode(text, /*add_special_tokens=*/false).size())
        << c.dir << ": " << text.substr(0, 80);
    EXPECT_LE(bound, tok->encode_with_special_text(text).size())
        << c.dir << ": " << text.substr(0, 80);
    if (bound > 0) ++bounded_texts;
  }
  if (c.bounded) {
    EXPECT_GT(bounded_texts, 0u) << c.dir;
    // 30 MB of text: a bound above a 32K context, at once.
    const std::string huge(30u << 20, 'x');
    EXPECT_GT(tok->min_token_count(huge), 32768u) << c.dir;
    // Newlines and tabs are not collapsed like spaces (16 M newlines were
    // counted as none: a 28 s, 3.7 GB prompt).
    EXPECT_GT(tok->min_token_count(std::string(16u << 20, '\n')), 32768u) << c.dir;
  } else {
    EXPECT_EQ(bounded_texts, 0u) << c.dir;
  }
}

// encode_with_special_text_bounded: within the limit exactly the full
// encoding; past it a prefix of the full encoding, longer than the limit.
TEST_P(MinTokenCount, BoundedEncodingIsExactWithinTheLimitAndAPrefixPastIt) {
  const Case& c = GetParam();
  const auto tok = load_tokenizer(shared_path(c.dir));
  for (const std::string& text : texts_for(c)) {
    const std::vector<int32_t> full = tok->encode_with_special_text(text);
    EXPECT_EQ(tok->encode_with_special_text_bounded(text, full.size()), full)
        << c.dir << ": " << text.substr(0, 80);
    EXPECT_EQ(tok->encode_with_special_text_bounded(text, full.size() + 7), full) << c.dir;
    if (full.size() < 4) continue;
    for (size_t limit : {size_t{0}, size_t{1}, full.size() / 2, full.size() - 1}) {
      const std::vector<int32_t> part = tok->encode_with_special_text_bounded(text, limit);
      ASSERT_GT(part.size(), limit) << c.dir << " limit " << limit;
      ASSERT_LE(part.size(), full.size());
      EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin()))
          << c.dir << " limit " << limit;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, MinTokenCount,
                         ::testing::Values(Case{"models/stories260K", "tok512 (stories260K)", true},
                                           Case{"tokenizers/llama2", "llama2", true},
                                           Case{"tokenizers/chinese-llama-2", "chinese-llama-2",
                                                true},
                                           Case{"tokenizers/qwen2", "qwen2", true}),
                         [](const auto& info) {
                           std::string n = info.param.dir;
                           n = n.substr(n.find('/') + 1);
                           for (char& ch : n)
                             if (ch == '-' || ch == '.') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace pagoda
