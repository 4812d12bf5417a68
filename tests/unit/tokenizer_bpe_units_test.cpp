// The pieces of byte-level BPE on their own: GPT-2's byte map, lossy UTF-8,
// the PCRE2 splitter, NFC, merge order, and the loaders' file formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/bpe_loader.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/bpe_normalizer.h"
#include "engine/tokenizer/bpe_regex.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::kReplacement;

TEST(BpeByteLevel, Gpt2ByteMap) {
  const auto& m = bpe::byte_to_unicode();
  EXPECT_EQ(m[' '], "\xC4\xA0");   // Ġ U+0120
  EXPECT_EQ(m['\n'], "\xC4\x8A");  // Ċ U+010A
  EXPECT_EQ(m['A'], "A");
  EXPECT_EQ(m[0], "\xC4\x80");     // U+0100
  EXPECT_EQ(m[0xAD], "\xC5\x83");  // soft hyphen is not printable: U+0143
  EXPECT_EQ(m[0xFF], "\xC3\xBF");  // ÿ maps to itself
  for (unsigned b = 0; b < 256; ++b) {
    size_t pos = 0;
    EXPECT_EQ(bpe::unicode_to_byte(bpe::next_code_point(m[b], pos)), static_cast<uint8_t>(b));
  }
  EXPECT_EQ(bpe::token_to_bytes("\xC4\xA0Hello\xC4\x8A"), " Hello\n");
  EXPECT_EQ(bpe::token_to_bytes("<|im_start|>"), "<|im_start|>");
  EXPECT_EQ(bpe::token_to_bytes("a b"), "a b");  // ' ' is not in the map: kept as is
}

TEST(BpeByteLevel, LossyUtf8) {
  EXPECT_EQ(bpe::utf8_lossy("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
  EXPECT_EQ(bpe::utf8_lossy("\xE4\xBD"), kReplacement);
  EXPECT_EQ(bpe::utf8_lossy("\xE0\x80"), kReplacement + kReplacement);  // E0 80: not a prefix
  EXPECT_EQ(bpe::utf8_lossy("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(bpe::utf8_lossy("\xF0\x9F\x98x"), kReplacement + "x");
  EXPECT_FALSE(bpe::is_valid_utf8("\xC0\xAF"));
  EXPECT_TRUE(bpe::is_valid_utf8("\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(bpe::is_valid_utf8("\xF4\x90\x80\x80"));
}

TEST(BpeModel, MergesByRankLeftmostFirst) {
  const auto g = bpe::byte_to_unicode()[' '];
  std::unordered_map<std::string, int32_t> vocab = {
      {"a", 0}, {"b", 1}, {"c", 2}, {g, 3}, {"ab", 4}, {"bc", 5}, {"abc", 6}, {g + g, 7}, {g + g + g + g, 8}};
  // bc ranks before ab: "abc" -> a + bc, and no merge a+bc exists.
  bpe::BpeModel m(vocab, {{"b", "c"}, {"a", "b"}, {g, g}, {g + g, g + g}}, false);
  std::vector<int32_t> out;
  m.encode_word("abc", out);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 5}));
  out.clear();
  m.encode_word("ab", out);
  EXPECT_EQ(out, (std::vector<int32_t>{4}));
  out.clear();
  m.encode_word("     ", out);  // 5 spaces: (ĠĠ)(ĠĠ)Ġ -> ĠĠĠĠ Ġ
  EXPECT_EQ(out, (std::vector<int32_t>{8, 3}));
  out.clear();
  m.encode_word("abc", out);  // cached: same answer
  EXPECT_EQ(out, (std::vector<int32_t>{0, 5}));
  out.clear();
  m.encode_word("xa", out);  // 'x' has no token and no unk: dropped (HF without unk_token)
  EXPECT_EQ(out, (std::vector<int32_t>{0}));
  bpe::BpeModel ignore(vocab, {{"b", "c"}, {"a", "b"}}, /*ignore_merges=*/true);
  out.clear();
  ignore.encode_word("abc", out);  // whole word in the vocab
  EXPECT_EQ(out, (std::vector<int32_t>{6}));
  EXPECT_THROW(bpe::BpeModel(vocab, {{"a", "c"}}, false), std::runtime_error);  // "ac" unknown
}

#ifdef PAGODA_HAVE_BPE
TEST(BpeRegex, Qwen2PatternSplitsIsolated) {
  const bpe::RegexSplitter s(bpe::kQwen2Pattern);
  auto split = [&](const std::string& t) {
    std::vector<std::string> out;
    for (auto p : s.split(t)) out.emplace_back(p);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world's 123!!\n\n  x"),
            (V{"Hello", " world", "'s", " ", "1", "2", "3", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split("I'LL  go"), (V{"I", "'LL", " ", " go"}));
  EXPECT_EQ(split("\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C"), (V{"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C"}));
  EXPECT_TRUE(split("").empty());
  EXPECT_THROW(bpe::RegexSplitter("(unclosed"), std::runtime_error);
  // Pieces from gaps: a pattern that matches only digits keeps the rest.
  const bpe::RegexSplitter digits(R"(\d+)");
  std::vector<std::string> out;
  for (auto p : digits.split("ab12cd")) out.emplace_back(p);
  EXPECT_EQ(out, (V{"ab", "12", "cd"}));
}
#endif

#ifdef PAGODA_HAVE_UTF8PROC
TEST(BpeNormalizer, Nfc) {
  EXPECT_EQ(bpe::nfc("e\xCC\x81"), "\xC3\xA9");     // e + U+0301 -> é
  EXPECT_EQ(bpe::nfc("\xE2\x84\xAB"), "\xC3\x85");  // U+212B ANGSTROM SIGN -> Å
  EXPECT_EQ(bpe::nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");  // ﬁ: NFKC would change it, NFC not
  EXPECT_EQ(bpe::nfc(""), "");
}
#endif

class BpeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pagoda_bpe_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::filesystem::path dir_;
};

TEST_F(BpeFiles, MergesTxtWithOrWithoutVersionLine) {
  const std::string vocab = write("vocab.json", R"({"a": 0, "b": 1, "ab": 2, "\u0120": 3})");
  const std::string cfg = write("tokenizer_config.json", R"({"added_tokens_decoder": {
      "4": {"content": "<|x|>", "special": true, "lstrip": false, "rstrip": false,
            "normalized": false, "single_word": false}}})");
  for (const std::string merges : {"#version: 0.2\na b\n", "a b\r\n\n"}) {
    const BpeSpec s = read_bpe_vocab_merges(vocab, write("merges.txt", merges), cfg);
    ASSERT_EQ(s.merges.size(), 1u);
    EXPECT_EQ(s.merges[0], (std::pair<std::string, std::string>{"a", "b"}));
    EXPECT_EQ(s.vocab.size(), 4u);
    ASSERT_EQ(s.added_tokens.size(), 1u);
    EXPECT_EQ(s.added_tokens[0].id, 4);
    EXPECT_TRUE(s.added_tokens[0].special);
    EXPECT_TRUE(s.nfc);
  }
  EXPECT_THROW(read_bpe_vocab_merges(vocab, write("merges.txt", "a b c\n"), cfg),
               std::runtime_error);
  EXPECT_THROW(read_bpe_vocab_merges(write("vocab.json", "{not json"),
                                     write("merges.txt", "a b\n"), cfg),
               std::runtime_error);
}

TEST_F(BpeFiles, TokenizerJsonKinds) {
  // Metaspace BPE (Llama 2 style): not byte-level.
  EXPECT_FALSE(read_bpe_tokenizer_json(write("tokenizer.json", R"({"model": {"type": "BPE",
      "vocab": {}, "merges": []}, "decoder": {"type": "Metaspace"}})")));
  EXPECT_FALSE(read_bpe_tokenizer_json(write("tokenizer.json",
                                             R"({"model": {"type": "Unigram"}})")));
  // GPT-2 style: ByteLevel with its own regex, merges as pairs.
  const auto gpt2 = read_bpe_tokenizer_json(write("tokenizer.json", R"({"model": {"type": "BPE",
      "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "decoder": {"type": "ByteLevel"}, "normalizer": null,
      "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true}]})"));
  ASSERT_TRUE(gpt2);
  EXPECT_EQ(gpt2->pattern, bpe::kGpt2Pattern);
  EXPECT_FALSE(gpt2->nfc);
  EXPECT_EQ(gpt2->merges.size(), 1u);
  EXPECT_EQ(gpt2->added_tokens.size(), 1u);
  // Unsupported parts are named, not ignored.
  try {
    read_bpe_tokenizer_json(write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {},
        "merges": []}, "decoder": {"type": "ByteLevel"}, "normalizer": {"type": "NFKC"}})"));
    ADD_FAILURE() << "NFKC accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("NFKC"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_bpe_tokenizer_json(write("tokenizer.json", R"({"model": {"type": "BPE",
      "vocab": {}, "merges": [], "byte_fallback": true}, "decoder": {"type": "ByteLevel"}})")),
               std::runtime_error);
}

}  // namespace
}  // namespace pagoda
