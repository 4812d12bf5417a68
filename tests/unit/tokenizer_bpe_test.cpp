// BpeTokenizer on Qwen2's real vocabulary against references we did not
// write: HF tokenizers' encodings (testvectors/tokenizer_encodings.json
// "qwen2") and llama.cpp's ggml-vocab-qwen2 vectors, through both
// tokenizer.json (Qwen2.5) and vocab.json + merges.txt (Qwen2).
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tests/unit/tokenizer_bpe_test_util.h"

namespace pagoda {
namespace {

using test::shared_path;

#ifdef PAGODA_HAVE_BPE

struct Source {
  const char* name;
  const Tokenizer& (*tok)();
  int64_t vocab_size;  // 151643 BPE tokens + the added tokens the files list
};

class BpeQwen2 : public ::testing::TestWithParam<Source> {};

TEST_P(BpeQwen2, MatchesHfTokenizersEncodings) {
  const Tokenizer& tok = GetParam().tok();
  const auto ref = test::read_json(shared_path("testvectors/tokenizer_encodings.json"));
  const auto& cases = ref.at("qwen2").at("cases");
  ASSERT_EQ(cases.size(), 18u);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE(text);
    EXPECT_EQ(tok.encode(text, /*add_special_tokens=*/false), want);
    // Qwen2 adds nothing with add_special_tokens (no BOS, add_eos_token off).
    EXPECT_EQ(tok.encode(text, /*add_special_tokens=*/true), want);
    EXPECT_EQ(tok.decode(want, /*skip_special_tokens=*/false), text);
  }
}

// llama.cpp tests/test-tokenizer-0.cpp: inputs split on "\n__ggml_vocab_test__\n"
// (the file ends with one, so no empty trailing input), one .out line of
// space-separated ids per input, tokenized with add_special=false and
// parse_special=false (no input holds special-token text).
TEST_P(BpeQwen2, MatchesLlamaCppVocabVectors) {
  const Tokenizer& tok = GetParam().tok();
  const std::string base = shared_path("testvectors/llama.cpp/ggml-vocab-qwen2.gguf");
  const std::string raw = test::read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream outs(test::read_file(base + ".out"));
  std::vector<std::vector<int32_t>> expected;
  for (std::string line; std::getline(outs, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + ": " + inputs[i]);
    EXPECT_EQ(tok.encode(inputs[i], false), expected[i]);
    EXPECT_EQ(tok.decode(expected[i], false), inputs[i]);
  }
}

TEST_P(BpeQwen2, SpecialTokensAndVocabulary) {
  const Tokenizer& tok = GetParam().tok();
  EXPECT_EQ(tok.vocab_size(), GetParam().vocab_size);
  EXPECT_FALSE(tok.bos_token_id().has_value());
  EXPECT_EQ(tok.id_to_piece(9707), "Hello");
  EXPECT_EQ(tok.id_to_piece(21927), "\xC4\xA0Hello");  // "ĠHello"
  EXPECT_EQ(tok.id_to_piece(151644), "<|im_start|>");
  EXPECT_TRUE(tok.is_special(151644));
  EXPECT_TRUE(tok.is_special(151643));
  EXPECT_FALSE(tok.is_special(9707));
  const std::vector<int32_t> ids = {151644, 872, 198, 9707, 151645};
  EXPECT_EQ(tok.decode(ids, false), "<|im_start|>user\nHello<|im_end|>");
  EXPECT_EQ(tok.decode(ids, true), "user\nHello");
  EXPECT_EQ(tok.encode_with_special_text("<|im_start|>user\nHello<|im_end|>"), ids);
  if (GetParam().vocab_size == 151665) {  // Qwen2.5's <tool_call>: added, not special
    EXPECT_FALSE(tok.is_special(151657));
    EXPECT_EQ(tok.id_to_piece(151657), "<tool_call>");
    EXPECT_EQ(tok.decode(std::vector<int32_t>{151645, 151657}, true), "<tool_call>");
    EXPECT_EQ(tok.encode("<tool_call>", false), (std::vector<int32_t>{151657}));
  }
  // Leftmost-longest: "<|im_start|>" wins over nothing shorter; text around
  // special tokens is encoded on its own ("Hello" after a token has no "Ġ").
  EXPECT_EQ(tok.encode("a<|endoftext|>Hello", false),
            (std::vector<int32_t>{64, 151643, 9707}));
}

TEST_P(BpeQwen2, NfcNormalizesInput) {
  const Tokenizer& tok = GetParam().tok();
  // "é" as e + U+0301 COMBINING ACUTE composes to U+00E9 first (normalizer NFC).
  EXPECT_EQ(tok.encode("caf" "e\xCC\x81", false), tok.encode("caf\xC3\xA9", false));
  EXPECT_EQ(tok.decode(tok.encode("caf" "e\xCC\x81", false), false), "caf\xC3\xA9");
}

TEST_P(BpeQwen2, BadInputIsRejected) {
  const Tokenizer& tok = GetParam().tok();
  EXPECT_THROW(tok.encode("bad \xFF byte", false), std::invalid_argument);
  EXPECT_THROW(tok.encode("truncated \xE4\xBD", false), std::invalid_argument);
  // Ids the tokenizer has no token for (Qwen2's logits have 151,936 rows,
  // its tokenizer 151,665 tokens) decode to "" (HF tokenizers skip them);
  // negative ids are an error.
  const std::vector<int32_t> past_the_end = {9707, 151665, 151935, 200000, 1879};
  EXPECT_EQ(tok.decode(past_the_end, false), "Hello world");
  EXPECT_EQ(tok.decode(past_the_end, true), "Hello world");
  EXPECT_EQ(tok.id_to_piece(151935), "");
  EXPECT_FALSE(tok.is_special(151935));
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(tok.decode(negative, false), std::out_of_range);
  EXPECT_THROW(tok.id_to_piece(-1), std::out_of_range);
  // Still usable afterwards.
  EXPECT_EQ(tok.encode("Hello world", false), (std::vector<int32_t>{9707, 1879}));
}

TEST_P(BpeQwen2, InvalidBytesDecodeAsReplacement) {
  const Tokenizer& tok = GetParam().tok();
  // The single-byte tokens, found by their byte-level pieces.
  std::map<std::string, int32_t> piece_id;
  for (int32_t id = 0; id < 151643; ++id) {
    const std::string p = tok.id_to_piece(id);
    if (p.size() <= 2) piece_id.emplace(p, id);
  }
  auto byte_id = [&](unsigned b) { return piece_id.at(bpe::byte_to_unicode()[b]); };
  // "你" = E4 BD A0. A truncated sequence is one maximal subpart: one U+FFFD
  // (Unicode 15 §3.9; Python's errors="replace").
  EXPECT_EQ(tok.decode(std::vector<int32_t>{byte_id(0xE4), byte_id(0xBD)}, false),
            test::kReplacement);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{byte_id(0xE4), byte_id(0xBD), byte_id(0xA0)}, false),
            "\xE4\xBD\xA0");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{byte_id(0xE4), byte_id('a')}, false),
            test::kReplacement + "a");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{byte_id(0xFF), byte_id(0xC0), byte_id(0x80)}, false),
            test::kReplacement + test::kReplacement + test::kReplacement);
}

INSTANTIATE_TEST_SUITE_P(
    Sources, BpeQwen2,
    ::testing::Values(Source{"tokenizer_json", &test::qwen25_json_tokenizer, 151665},
                      Source{"vocab_merges", &test::qwen2_vocab_merges_tokenizer, 151646}),
    [](const auto& info) { return std::string(info.param.name); });

#endif  // PAGODA_HAVE_BPE

TEST(BpeLoad, KindComesFromTheFiles) {
  // tokenizer.model only: SentencePiece.
  const auto spm = load_tokenizer(shared_path("tokenizers/llama2"));
  EXPECT_EQ(dynamic_cast<const BpeTokenizer*>(spm.get()), nullptr);
  EXPECT_THROW(load_tokenizer(shared_path("no/such/dir")), std::runtime_error);
#ifdef PAGODA_HAVE_BPE
  EXPECT_NE(dynamic_cast<const BpeTokenizer*>(&test::qwen25_json_tokenizer()), nullptr);
  EXPECT_NE(dynamic_cast<const BpeTokenizer*>(&test::qwen2_vocab_merges_tokenizer()), nullptr);
#else
  try {
    load_tokenizer(shared_path("tokenizers/qwen2.5"));
    ADD_FAILURE() << "a BPE directory loaded without PCRE2";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("built without PCRE2"), std::string::npos) << e.what();
  }
#endif
}

}  // namespace
}  // namespace pagoda
