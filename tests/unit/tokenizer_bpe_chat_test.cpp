// BpeTokenizer on the tiny random Qwen2 chat model's transformers reference
// (models/tiny-random-qwen2-chat/reference.json, made by transformers'
// Qwen2Tokenizer): rendered chat prompts with special-token text, completion
// prompts, greedy outputs decoded, and the Detokenizer streaming byte-level
// tokens of Chinese, Thai, Korean and emoji text whole.
#include <gtest/gtest.h>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/detokenizer.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda {
namespace {

using test::kReplacement;
using test::shared_path;

#ifdef PAGODA_HAVE_BPE

const std::string kModelDir = "models/tiny-random-qwen2-chat";

const Tokenizer& chat_tokenizer() {
  static const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared_path(kModelDir));
  return *tok;
}

const nlohmann::json& reference() {
  static const nlohmann::json ref = test::read_json(shared_path(kModelDir + "/reference.json"));
  return ref;
}

// Streams gen after prompt through the Detokenizer; checks every delta is
// whole UTF-8 without U+FFFD and returns their concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                   const std::vector<int32_t>& gen) {
  Detokenizer detok(tok, prompt, /*skip_special_tokens=*/true);
  std::string text;
  auto take = [&](const std::string& delta) {
    EXPECT_TRUE(test::is_valid_utf8(delta)) << delta;
    EXPECT_EQ(delta.find(kReplacement), std::string::npos) << "delta: " << delta;
    text += delta;
  };
  for (int32_t id : gen) take(detok.step(id));
  take(detok.flush());
  return text;
}

TEST(BpeChat, RenderedPromptsGiveReferenceIds) {
  const Tokenizer& tok = chat_tokenizer();
  EXPECT_NE(dynamic_cast<const BpeTokenizer*>(&tok), nullptr);
  EXPECT_FALSE(tok.bos_token_id().has_value());
  EXPECT_EQ(tok.eos_token_id(), 151645);  // "<|im_end|>" (tokenizer_config.json)
  const auto& chats = reference().at("chat");
  ASSERT_EQ(chats.size(), 3u);
  for (const auto& c : chats) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::string rendered = c.at("rendered");
    const auto want = c.at("prompt_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode_with_special_text(rendered), want);
    EXPECT_EQ(tok.decode(want, /*skip_special_tokens=*/false), rendered);
    const auto greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(greedy, /*skip_special_tokens=*/true), c.at("greedy_text"));
  }
}

TEST(BpeChat, CompletionPromptsGiveReferenceIds) {
  const Tokenizer& tok = chat_tokenizer();
  const auto& cases = reference().at("completion");
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string prompt = c.at("prompt");
    SCOPED_TRACE(prompt);
    const auto want = c.at("prompt_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(prompt, /*add_special_tokens=*/true), want);
    EXPECT_EQ(tok.decode(want, true), prompt);
    const auto greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(greedy, true), c.at("greedy_text"));
  }
}

TEST(BpeChat, StreamingGreedyOutputsNeverEmitsReplacement) {
  const Tokenizer& tok = chat_tokenizer();
  for (const char* kind : {"chat", "completion"}) {
    for (const auto& c : reference().at(kind)) {
      const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
      const auto greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
      SCOPED_TRACE(c.at("greedy_text").get<std::string>());
      EXPECT_EQ(stream(tok, prompt, greedy), c.at("greedy_text").get<std::string>());
      // The prompts streamed as if generated (the emoji / ü prompt included).
      EXPECT_EQ(stream(tok, {}, prompt), tok.decode(prompt, true));
    }
  }
}

TEST(BpeChat, StreamingSplitCharactersComeWhole) {
  const Tokenizer& tok = chat_tokenizer();
  // Rare CJK characters and emoji have no token of their own: their UTF-8
  // bytes are spread over byte-level tokens.
  const std::string text = "\xF0\x9F\xA6\x99 \xE5\x9C\xB9\xE9\xBE\x98 \xF0\x9F\x90\xB6 "
                           "\xE0\xB9\x80\xE0\xB8\x88\xE0\xB9\x89\xE0\xB8\xB2";  // 🦙 圹龘 🐶 เจ้า
  const std::vector<int32_t> ids = tok.encode(text, false);
  int partial = 0;
  for (int32_t id : ids) {
    if (tok.decode(std::vector<int32_t>{id}, true).find(kReplacement) != std::string::npos) {
      ++partial;
    }
  }
  EXPECT_GT(partial, 0);
  EXPECT_EQ(stream(tok, {}, ids), text);
  EXPECT_EQ(stream(tok, {151644, 77091, 198}, ids), text);
}

// The model has 151,936 logits rows (config.json vocab_size), the tokenizer
// 151,665 tokens: a random model can sample an id in between. It decodes to
// nothing (HF tokenizers skip ids without a token) and streams as nothing.
TEST(BpeChat, IdsPastTheTokenizerButInTheModelDecodeToNothing) {
  const Tokenizer& tok = chat_tokenizer();
  const auto config = test::read_json(shared_path(kModelDir + "/config.json"));
  const int32_t model_vocab = config.at("vocab_size");
  ASSERT_EQ(model_vocab, 151936);
  ASSERT_EQ(tok.vocab_size(), 151665);
  const std::vector<int32_t> hello = tok.encode("你好, world", false);
  std::vector<int32_t> mixed;
  for (int32_t id : hello) {
    mixed.push_back(static_cast<int32_t>(tok.vocab_size()));
    mixed.push_back(id);
    mixed.push_back(model_vocab - 1);
  }
  EXPECT_EQ(tok.decode(mixed, true), "你好, world");
  EXPECT_EQ(tok.decode(mixed, false), "你好, world");
  for (int32_t id = static_cast<int32_t>(tok.vocab_size()); id < model_vocab; ++id) {
    EXPECT_EQ(tok.decode(std::vector<int32_t>{id}, false), "") << id;
    EXPECT_FALSE(tok.is_special(id)) << id;
  }
  EXPECT_EQ(stream(tok, {151644, 77091, 198}, mixed), "你好, world");
  // Only past-the-end ids: no text at all, no error.
  EXPECT_EQ(stream(tok, {151644}, {151665, 151700, 151935}), "");
}

#endif  // PAGODA_HAVE_BPE

}  // namespace
}  // namespace pagoda
