// SentencePieceTokenizer against sentencepiece 0.1.97's own encodings
// (testvectors/tokenizer_encodings.json) and llama.cpp's llama-spm vectors.
#include <gtest/gtest.h>

#include <cctype>

#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::shared_path;

// The text sentencepiece's decoder gives for reference pieces, computed from
// the reference's own pieces (not from our tokenizer): "▁" -> " ", <0xNN>
// byte pieces concatenated as bytes, the first piece's leading "▁" dropped.
// Inputs here are valid UTF-8 so no invalid byte handling is needed.
std::string text_of_pieces(const std::vector<std::string>& pieces) {
  // A byte piece is exactly "<0xNN>" with two upper-case hex digits.
  auto is_byte_piece = [](const std::string& p) {
    return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' &&
           std::isxdigit(static_cast<unsigned char>(p[3])) &&
           std::isxdigit(static_cast<unsigned char>(p[4]));
  };
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (is_byte_piece(pieces[i])) {
      out += static_cast<char>(std::stoi(pieces[i].substr(3, 2), nullptr, 16));
      continue;
    }
    const std::string& p = pieces[i];
    for (size_t k = 0; k < p.size();) {
      if (p.compare(k, 3, "\xE2\x96\x81") == 0) {  // "▁"
        if (!(i == 0 && k == 0)) out += ' ';
        k += 3;
      } else {
        out += p[k++];
      }
    }
  }
  return out;
}

struct Set {
  const char* key;
  const char* model;
};

class SpmEncodings : public ::testing::TestWithParam<Set> {};

TEST_P(SpmEncodings, MatchSentencePieceReference) {
  const Set set = GetParam();
  const SentencePieceTokenizer tok(shared_path(set.model), TokenizerConfig{});
  const auto ref = test::read_json(shared_path("testvectors/tokenizer_encodings.json"));
  const auto& cases = ref.at(set.key).at("cases");
  ASSERT_GE(cases.size(), 18u);
  int round_trips = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    const auto pieces = c.at("pieces").get<std::vector<std::string>>();
    SCOPED_TRACE(text);
    const auto ids = tok.encode(text, /*add_special_tokens=*/false);
    EXPECT_EQ(ids, want);
    for (size_t i = 0; i < ids.size() && i < pieces.size(); ++i) {
      EXPECT_EQ(tok.id_to_piece(ids[i]), pieces[i]);
    }
    const std::string decoded = tok.decode(want, /*skip_special_tokens=*/true);
    EXPECT_EQ(decoded, text_of_pieces(pieces));
    if (decoded == text) ++round_trips;
  }
  // llama2 and chinese-llama-2 (normalizer without remove_extra_whitespaces)
  // round-trip every case. tok512's trained normalizer has
  // remove_extra_whitespaces=true (see testvectors/tok512_runc_vs_sentencepiece
  // .json), so runs of spaces collapse and a lone " " encodes to nothing:
  // exactly the two cases below do not round-trip, and decode gives what the
  // reference pieces spell.
  if (std::string(set.key) == "tok512 (stories260K)") {
    EXPECT_EQ(round_trips, static_cast<int>(cases.size()) - 2);
    EXPECT_EQ(tok.decode(tok.encode("def foo(x):\n    return x * 2\n", false), true),
              "def foo(x):\n return x * 2\n");
    EXPECT_EQ(tok.decode(tok.encode(" ", false), true), "");
  } else {
    EXPECT_EQ(round_trips, static_cast<int>(cases.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, SpmEncodings,
    ::testing::Values(Set{"llama2", "tokenizers/llama2/tokenizer.model"},
                      Set{"chinese-llama-2", "tokenizers/chinese-llama-2/tokenizer.model"},
                      Set{"tok512 (stories260K)", "models/stories260K/tokenizer.model"}),
    [](const auto& info) { return std::to_string(info.index); });

// llama.cpp tests/test-tokenizer-0.cpp: inputs split on "\n__ggml_vocab_test__\n"
// (the file ends with one, so no empty trailing input), one .out line of
// space-separated ids per input (whitespace-stripped), tokenized with
// add_special=false: no BOS; the SPM leading space is added as sentencepiece's
// dummy prefix. llama.cpp keys its tests by input text, so duplicates count once.
TEST(TokenizerSpm, LlamaCppVocabVectors) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   TokenizerConfig{});
  const std::string base = shared_path("testvectors/llama.cpp/ggml-vocab-llama-spm.gguf");
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
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GE(inputs.size(), 40u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(inputs[i]);
    if (!expected[i].empty()) {
      EXPECT_NE(expected[i][0], 1) << "vectors carry no BOS";
    }
    EXPECT_EQ(tok.encode(inputs[i], false), expected[i]);
    EXPECT_EQ(tok.decode(expected[i], true), inputs[i]);
  }
}

TEST(TokenizerSpm, SpecialTokens) {
  TokenizerConfig cfg;
  cfg.bos_token = "<s>";
  cfg.eos_token = "</s>";
  SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"), cfg);
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.bos_token_id(), 1);
  EXPECT_EQ(tok.eos_token_id(), 2);
  EXPECT_EQ(tok.encode("Hello", true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(tok.encode("Hello", false), (std::vector<int32_t>{15043}));
  // "<s>" in text is plain text for sentencepiece, not the control token.
  const auto s_ids = tok.encode("<s>", false);
  EXPECT_EQ(std::count(s_ids.begin(), s_ids.end(), 1), 0);
  EXPECT_EQ(tok.decode(s_ids, true), "<s>");
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_FALSE(tok.is_special(15043));
  EXPECT_FALSE(tok.is_special(243));  // byte piece <0xF0>
  const std::vector<int32_t> ids{1, 15043, 0, 3186, 2};
  // HF skip_special_tokens drops all_special_ids, <unk> included.
  EXPECT_EQ(tok.decode(ids, true), "Hello world");
  // Kept, special pieces appear as text and the runs keep their spaces
  // (LlamaTokenizerFast).
  EXPECT_EQ(tok.decode(ids, false), "<s> Hello<unk> world</s>");
  // Ids past the vocabulary (a model's logits may have more rows) give no
  // text, as HF tokenizers' decode skips ids without a token; negative ids
  // are an error.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{15043, 32000, 40000, 3186}, true), "Hello world");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{15043, 32000, 3186}, false), "Hello world");
  EXPECT_EQ(tok.id_to_piece(32000), "");
  EXPECT_FALSE(tok.is_special(32000));
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}, true), std::out_of_range);
  EXPECT_THROW(tok.id_to_piece(-1), std::out_of_range);

  TokenizerConfig eos_cfg = cfg;
  eos_cfg.add_bos_token = false;
  eos_cfg.add_eos_token = true;
  SentencePieceTokenizer tok2(shared_path("tokenizers/llama2/tokenizer.model"), eos_cfg);
  EXPECT_EQ(tok2.encode("Hello", true), (std::vector<int32_t>{15043, 2}));
}

TEST(TokenizerSpm, EncodeWithSpecialText) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   TokenizerConfig{});
  // The text at the start keeps the dummy prefix ("▁Hello" 15043); text after
  // a special token does not ("Hello" 10994, as in llama.cpp's "Hello world"
  // vectors without the prefix: tokenizer_encodings' "Hello" piece 10994).
  EXPECT_EQ(tok.encode_with_special_text("Hello</s><s>Hello"),
            (std::vector<int32_t>{15043, 2, 1, 10994}));
  EXPECT_EQ(tok.encode_with_special_text("<s>"), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok.encode_with_special_text("<unk>x"), (std::vector<int32_t>{0, 29916}));
  EXPECT_EQ(tok.encode_with_special_text(""), (std::vector<int32_t>{}));
  // Without special text it is plain encode.
  EXPECT_EQ(tok.encode_with_special_text("Once upon a time"), tok.encode("Once upon a time", false));
  // "<s" alone is text.
  EXPECT_EQ(tok.encode_with_special_text("a<s"), tok.encode("a<s", false));
}

TEST(TokenizerSpm, ByteFallbackDecode) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   TokenizerConfig{});
  // 🦙 = F0 9F A6 99 as byte pieces <0xF0><0x9F><0xA6><0x99> (ids 243 162 169 156).
  EXPECT_EQ(tok.decode(std::vector<int32_t>{243, 162, 169, 156}, true), "\xF0\x9F\xA6\x99");
  // An unfinished character decodes to replacement characters, never raw bytes.
  const std::string partial = tok.decode(std::vector<int32_t>{243, 162}, true);
  EXPECT_TRUE(test::is_valid_utf8(partial));
  EXPECT_NE(partial.find(test::kReplacement), std::string::npos);
}

TEST(TokenizerSpm, BadModelFile) {
  EXPECT_THROW(SentencePieceTokenizer("/nonexistent/tokenizer.model", TokenizerConfig{}),
               std::runtime_error);
}

}  // namespace
}  // namespace pagoda
