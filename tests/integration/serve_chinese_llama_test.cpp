// `pagoda serve` on tiny-random-chinese-llama (Llama, Chinese-LLaMA-2's
// 55,296-piece SentencePiece with byte fallback, the Llama-2-chat template
// from its tokenizer_config.json) against HF transformers' reference.json:
// prompt ids and counts, greedy ids and text, for chat and completions;
// the template's "<s>" is the only BOS (chat prompts are tokenized with
// add_special_tokens off).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/integration/serve_reference_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

struct ChineseLlama {
  static constexpr const char* kDir = "tiny-random-chinese-llama";
  static constexpr const char* kName = "chinese-llama";
};
using ServeChineseLlama = ServeReferenceModel<ChineseLlama>;

TEST_F(ServeChineseLlama, ChatCompletionsMatchTransformers) {
  const json ref = reference();
  ASSERT_EQ(ref["chat"].size(), 3u);
  for (const json& c : ref["chat"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    // 36, 40 and 35 prompt tokens: "<s>" → 1 (once), "</s>" → 2, and no "▁"
    // before the text that follows a special token ("[" is 29961, not 518).
    expect_chat_case_matches(port(), *tok_, c);
  }
}

// The Llama-2-chat rendering starts with "<s>": that text is the one BOS.
// Chat prompts are tokenized with add_special_tokens off by default (vLLM);
// asking for it adds the tokenizer's BOS in front (a second one).
TEST_F(ServeChineseLlama, ChatPromptHasOneBos) {
  const json en = reference()["chat"][0];
  ASSERT_EQ(en["rendered"].get<std::string>().rfind("<s>[INST]", 0), 0u);
  json body = {{"messages", en["messages"]}, {"max_tokens", 1}, {"temperature", 0}, {"return_token_ids", true}};
  auto ids = post_json(port(), "/v1/chat/completions", body)["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 29961);  // "[", not a second BOS
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 1);

  body["add_special_tokens"] = true;
  auto doubled = post_json(port(), "/v1/chat/completions", body)["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> want = {1};
  want.insert(want.end(), ids.begin(), ids.end());
  EXPECT_EQ(doubled, want);
}

TEST_F(ServeChineseLlama, CompletionsMatchTransformers) {
  const json ref = reference();
  ASSERT_EQ(ref["completion"].size(), 5u);
  for (const json& c : ref["completion"]) {
    const std::string prompt = c["prompt"];
    SCOPED_TRACE(prompt);
    json sent = prompt;
    if (prompt == "法国的首都是") {
      // sentencepiece and HF's tokenizer (transformers 5's LlamaTokenizer is
      // the `tokenizers` one) break a score tie between two segmentations
      // of this text differently: sentencepiece 0.1.97 ends it with 35983
      // 30392 (首都|是), the reference with 31688 32030 (首|都是). The text
      // prompt's own ids are checked to spell the same text; the prompt
      // count and the generation are checked from the reference's ids, sent
      // as a token-id prompt (the API takes one).
      json as_text = post_json(port(), "/v1/completions",
                               {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}, {"return_token_ids", true}});
      auto ours = as_text["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok_->decode(ours, true), prompt);
      EXPECT_EQ(tok_->decode(c["prompt_ids"].get<std::vector<int32_t>>(), true), prompt);
      sent = c["prompt_ids"];
    }
    expect_completion_case_matches(port(), *tok_, c, sent);
  }
}

}  // namespace
}  // namespace pagoda::testing_http
