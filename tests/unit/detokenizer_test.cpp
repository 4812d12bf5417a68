// Detokenizer: streamed deltas are whole UTF-8 characters, keep SentencePiece
// leading spaces, and add up to the full decode.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "tests/unit/tokenizer_bpe_test_util.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::is_valid_utf8;
using test::kReplacement;
using test::shared_path;

TokenizerConfig llama_config() {
  TokenizerConfig cfg;
  cfg.bos_token = "<s>";
  cfg.eos_token = "</s>";
  return cfg;
}

struct Stream {
  std::vector<std::string> deltas;  // one per step, then flush()
  std::string text;
};

Stream stream(const Tokenizer& tok, const std::vector<int32_t>& prompt,
              const std::vector<int32_t>& gen, bool skip_special = true) {
  Detokenizer detok(tok, prompt, skip_special);
  Stream s;
  for (int32_t id : gen) s.deltas.push_back(detok.step(id));
  s.deltas.push_back(detok.flush());
  for (const auto& d : s.deltas) s.text += d;
  return s;
}

bool starts_with_space_marker(const std::string& piece) {
  return piece.rfind("\xE2\x96\x81", 0) == 0;
}

TEST(DetokenizerUtf8Check, RejectsBrokenSequences) {
  EXPECT_TRUE(is_valid_utf8("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99"));
  EXPECT_FALSE(is_valid_utf8("\xE4\xBD"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xBD"));              // stray continuation
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

struct Set {
  const char* key;
  const char* model;
};

class DetokenizerEncodings : public ::testing::TestWithParam<Set> {};

// Every reference text, streamed one id at a time after the prompt "Hello"
// (with BOS) and after an empty prompt.
TEST_P(DetokenizerEncodings, StreamsEveryReferenceText) {
  const Set set = GetParam();
  const SentencePieceTokenizer tok(shared_path(set.model), llama_config());
  const auto ref = test::read_json(shared_path("testvectors/tokenizer_encodings.json"));
  const std::vector<int32_t> prompt = tok.encode("Hello", true);
  ASSERT_EQ(prompt.front(), 1);
  for (const auto& c : ref.at(set.key).at("cases")) {
    const auto gen = c.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE(c.at("text").get<std::string>());
    const std::string plain = tok.decode(gen, true);

    const Stream s = stream(tok, prompt, gen);
    for (const auto& d : s.deltas) {
      EXPECT_TRUE(is_valid_utf8(d)) << d;
      EXPECT_EQ(d.find(kReplacement), std::string::npos) << d;
    }
    // The first generated token keeps its "▁" as a space after the prompt.
    if (!gen.empty() && starts_with_space_marker(tok.id_to_piece(gen[0]))) {
      EXPECT_EQ(s.text, " " + plain);
    } else {
      EXPECT_EQ(s.text, plain);
    }
    // ... which is what decoding prompt and generation together gives.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    EXPECT_EQ(tok.decode(prompt, true) + s.text, tok.decode(all, true));

    // No prompt: exactly decode(generated).
    const Stream bare = stream(tok, {}, gen);
    EXPECT_EQ(bare.text, plain);
    for (const auto& d : bare.deltas) EXPECT_TRUE(is_valid_utf8(d)) << d;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, DetokenizerEncodings,
    ::testing::Values(Set{"llama2", "tokenizers/llama2/tokenizer.model"},
                      Set{"chinese-llama-2", "tokenizers/chinese-llama-2/tokenizer.model"},
                      Set{"tok512 (stories260K)", "models/stories260K/tokenizer.model"}),
    [](const auto& info) { return std::to_string(info.index); });

TEST(Detokenizer, ByteFallbackCharacterComesWhole) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   llama_config());
  // "🦙" = <0xF0><0x9F><0xA6><0x99>: nothing until the fourth byte.
  const Stream s = stream(tok, tok.encode("Hello", true), {243, 162, 169, 156});
  EXPECT_EQ(s.deltas, (std::vector<std::string>{"", "", "", "\xF0\x9F\xA6\x99", ""}));
}

TEST(Detokenizer, StoriesFirstTokenKeepsItsSpace) {
  const SentencePieceTokenizer tok(shared_path("models/stories260K/tokenizer.model"),
                                   llama_config());
  const auto prompt = tok.encode("Once upon a time", true);
  const auto full = tok.encode("Once upon a time there", true);
  ASSERT_GT(full.size(), prompt.size());
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), full.begin()));
  const std::vector<int32_t> gen(full.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                 full.end());
  ASSERT_TRUE(starts_with_space_marker(tok.id_to_piece(gen[0])));
  const Stream s = stream(tok, prompt, gen);
  ASSERT_FALSE(s.deltas[0].empty());
  EXPECT_EQ(s.deltas[0][0], ' ');
  EXPECT_EQ(s.text, " there");
}

TEST(Detokenizer, SpecialTokensSkippedOrShown) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   llama_config());
  const auto prompt = tok.encode("Hello", true);
  // " world" EOS BOS " world": skipped specials leave the spaces intact.
  const std::vector<int32_t> gen{3186, 2, 1, 3186, 0};
  const Stream skipped = stream(tok, prompt, gen, true);
  EXPECT_EQ(skipped.deltas, (std::vector<std::string>{" world", "", "", " world", "", ""}));
  const Stream shown = stream(tok, prompt, gen, false);
  EXPECT_EQ(shown.text, " world</s><s> world<unk>");
}

// spaces_between_special_tokens=false (with skip_special_tokens=false):
// transformers' decode(ids, skip_special_tokens=False,
// spaces_between_special_tokens=False) joins special tokens and text with
// nothing between them ("</s><s></s>"), and so does vLLM's fast
// detokenizer for either value (tokenizers' DecodeStream adds no space).
// The detokenizer never inserts a space, so the flag's false is what it
// streams; true matches vLLM's default fast path, not the slow tokenizer's
// " ".join.
TEST(Detokenizer, SpecialTokensStreamWithoutSpacesBetweenThem) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   llama_config());
  const std::vector<int32_t> gen{2, 1, 2, 3186, 1};  // </s> <s> </s> " world" <s>
  EXPECT_EQ(stream(tok, tok.encode("Hello", true), gen, false).text, "</s><s></s> world<s>");
  EXPECT_EQ(tok.decode(gen, false), "</s><s></s> world<s>");
}

TEST(Detokenizer, InvalidBytesAreFlushedAsReplacement) {
  const SentencePieceTokenizer tok(shared_path("tokenizers/llama2/tokenizer.model"),
                                   llama_config());
  const auto prompt = tok.encode("Hello", true);
  // An unfinished character at the end: held back, flushed as U+FFFD.
  const Stream tail = stream(tok, prompt, {15043, 243, 162});
  EXPECT_EQ(tail.deltas[1], "");
  EXPECT_EQ(tail.deltas[2], "");
  EXPECT_EQ(tail.text, " " + tok.decode(std::vector<int32_t>{15043, 243, 162}, true));
  EXPECT_NE(tail.deltas.back().find(kReplacement), std::string::npos);
  // Lead bytes that never complete: emitted once 4 are pending (a UTF-8
  // character has at most 4 bytes), so the window stays bounded.
  const std::vector<int32_t> junk(9, 243);
  const Stream s = stream(tok, prompt, junk);
  for (const auto& d : s.deltas) EXPECT_TRUE(is_valid_utf8(d));
  EXPECT_EQ(s.text, tok.decode(junk, true));
  EXPECT_NE(s.deltas[3], "");
}

// The id of each byte's token: SentencePiece's <0xNN> pieces (byte
// fallback), or byte-level BPE's single-byte pieces (GPT-2's byte alphabet).
std::vector<int32_t> byte_token_ids(const Tokenizer& tok, bool sentencepiece) {
  std::vector<int32_t> ids(256, -1);
  std::map<std::string, size_t> byte_of_piece;
  for (size_t b = 0; b < 256; ++b)
    byte_of_piece[sentencepiece ? fmt::format("<0x{:02X}>", b) : bpe::byte_to_unicode()[b]] = b;
  for (int32_t id = 0; id < static_cast<int32_t>(tok.vocab_size()); ++id) {
    auto it = byte_of_piece.find(tok.id_to_piece(id));
    if (it != byte_of_piece.end()) ids[it->second] = id;
  }
  for (size_t b = 0; b < 256; ++b) EXPECT_GE(ids[b], 0) << "no token for byte " << b;
  return ids;
}

struct ByteSet {
  const char* name;
  bool sentencepiece;
};

class DetokenizerInvalidBytes : public ::testing::TestWithParam<ByteSet> {
 protected:
  const Tokenizer& tok() {
    if (GetParam().sentencepiece) {
      static const SentencePieceTokenizer sp(shared_path("tokenizers/llama2/tokenizer.model"),
                                             llama_config());
      return sp;
    }
    return test::qwen2_vocab_merges_tokenizer();
  }
  std::vector<int32_t> bytes(const std::vector<int32_t>& ids_of, const std::vector<uint8_t>& b) {
    std::vector<int32_t> out;
    for (uint8_t x : b) out.push_back(ids_of[x]);
    return out;
  }
};

// The case: three stray continuation bytes and the lead of "中",
// then the rest of it. Four pending tokens ending in U+FFFD used to emit the
// unfinished character's U+FFFD too, which "中" then could not take back.
TEST_P(DetokenizerInvalidBytes, UnfinishedCharacterAfterFourInvalidBytes) {
  const std::vector<int32_t> ids_of = byte_token_ids(tok(), GetParam().sentencepiece);
  const auto gen = bytes(ids_of, {0x80, 0x80, 0x80, 0xE4, 0xB8, 0xAD, 'a'});
  const Stream s = stream(tok(), {}, gen);
  EXPECT_EQ(s.text, tok().decode(gen, true));
  EXPECT_EQ(s.text,
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xE4\xB8\xAD"
            "a");
  for (const auto& d : s.deltas) EXPECT_TRUE(is_valid_utf8(d)) << d;
}

// Random byte tokens (invalid and valid UTF-8 mixed, biased to lead and
// continuation bytes), with text tokens between some: the streamed text is
// the full decode, after an empty prompt and after a prompt.
TEST_P(DetokenizerInvalidBytes, RandomBytesAddUpToTheFullDecode) {
  const Tokenizer& t = tok();
  const std::vector<int32_t> ids_of = byte_token_ids(t, GetParam().sentencepiece);
  const std::vector<int32_t> word = t.encode(" hello", false);
  const std::vector<int32_t> prompt = t.encode("Hello", GetParam().sentencepiece);
  std::mt19937 rng(12);
  const std::vector<uint8_t> interesting = {0x80, 0x9F, 0xA6, 0xB8, 0xAD, 0xBF,
                                            0xC3, 0xE4, 0xF0, 0xF4, 0xFF, 'x'};
  for (int round = 0; round < 400; ++round) {
    std::vector<int32_t> gen;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) {
      const unsigned r = rng() % 10;
      if (r == 0) {
        gen.insert(gen.end(), word.begin(), word.end());
      } else if (r < 8) {
        gen.push_back(ids_of[interesting[rng() % interesting.size()]]);
      } else {
        gen.push_back(ids_of[rng() % 256]);
      }
    }
    SCOPED_TRACE(::testing::PrintToString(gen));
    const Stream bare = stream(t, {}, gen);
    ASSERT_EQ(bare.text, t.decode(gen, true));
    for (const auto& d : bare.deltas) ASSERT_TRUE(is_valid_utf8(d)) << d;
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    const Stream after = stream(t, prompt, gen);
    ASSERT_EQ(t.decode(prompt, true) + after.text, t.decode(all, true));
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, DetokenizerInvalidBytes,
                         ::testing::Values(ByteSet{"qwen2_byte_level_bpe", false},
                                           ByteSet{"llama2_byte_fallback", true}),
                         [](const auto& info) { return std::string(info.param.name); });

// Decodes through a real tokenizer while recording the longest span decoded.
class CountingTokenizer final : public Tokenizer {
 public:
  explicit CountingTokenizer(const Tokenizer& inner) : inner_(inner) {}
  std::vector<int32_t> encode(std::string_view t, bool s) const override {
    return inner_.encode(t, s);
  }
  std::string decode(std::span<const int32_t> ids, bool s) const override {
    max_span = std::max(max_span, ids.size());
    return inner_.decode(ids, s);
  }
  std::string id_to_piece(int32_t id) const override { return inner_.id_to_piece(id); }
  bool is_special(int32_t id) const override { return inner_.is_special(id); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  std::optional<int32_t> bos_token_id() const override { return inner_.bos_token_id(); }
  std::optional<int32_t> eos_token_id() const override { return inner_.eos_token_id(); }
  mutable size_t max_span = 0;

 private:
  const Tokenizer& inner_;
};

TEST(Detokenizer, WindowStaysSmallOnLongStreams) {
  const SentencePieceTokenizer real(shared_path("tokenizers/chinese-llama-2/tokenizer.model"),
                                    llama_config());
  const CountingTokenizer tok(real);
  std::string text;
  for (int i = 0; i < 150; ++i) text += "Once upon a time 你好，世界！ emoji 😀🐶 ";
  const auto gen = real.encode(text, false);
  ASSERT_GT(gen.size(), 2000u);
  const auto prompt = real.encode("A long prompt that goes on for a while before it ends", true);
  const Stream s = stream(tok, prompt, gen);
  EXPECT_EQ(s.text, " " + real.decode(gen, true));
  EXPECT_LE(tok.max_span, 10u);
}

// HF transformers' decoded greedy text (reference.json) streamed token by
// token after HF's prompt ids.
TEST(Detokenizer, MatchesTransformersGreedyText) {
  const std::string dir = shared_path("models/tiny-random-chinese-llama");
  const auto tok = load_tokenizer(dir);
  const auto ref = test::read_json(dir + "/reference.json");
  int n = 0;
  for (const char* kind : {"completion", "chat"}) {
    for (const auto& c : ref.at(kind)) {
      const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
      const auto gen = c.at("greedy_ids").get<std::vector<int32_t>>();
      const std::string hf = c.at("greedy_text");
      const Stream s = stream(*tok, prompt, gen);
      for (const auto& d : s.deltas) EXPECT_TRUE(is_valid_utf8(d));
      const bool space = starts_with_space_marker(tok->id_to_piece(gen.at(0)));
      EXPECT_EQ(s.text, space ? " " + hf : hf);
      ++n;
    }
  }
  EXPECT_EQ(n, 8);
}

}  // namespace
}  // namespace pagoda
