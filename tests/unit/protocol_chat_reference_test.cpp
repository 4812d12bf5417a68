// Chat prompts end to end through the protocol layer with the real pieces:
// Chinese-LLaMA-2's SentencePiece tokenizer and the Llama-2-chat template
// from its tokenizer_config.json, against the prompt ids HF transformers
// produced (shared/models/tiny-random-chinese-llama/reference.json): the
// template's "<s>"/"</s>" text becomes BOS/EOS ids, no second BOS is added,
// and text after a special token gets no "▁" prefix (legacy=false).
#include <gtest/gtest.h>

#include <fstream>

#include "engine/chat/chat_template.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-chinese-llama";

json reference() {
  std::ifstream in(kDir + "/reference.json");
  return json::parse(in);
}

ServingModel chinese_llama() {
  ServingModel m;
  m.served_model_name = "cl";
  m.max_model_len = 4096;
  auto tok = load_tokenizer(kDir);
  TokenizerConfig tc = TokenizerConfig::from_dir(kDir);
  m.tokenizer = tok;
  m.prompt_tokenizer = prompt_tokenizer_options(kDir, tc, *tok);
  auto tmpl = std::make_shared<ChatTemplate>(tc.chat_template);
  m.chat_renderer = [tmpl, tc](const json& messages, bool add_generation_prompt) {
    return tmpl->render(messages, add_generation_prompt, tc.bos_token, tc.eos_token);
  };
  return m;
}

TEST(ProtocolChatReference, PromptIdsMatchTransformers) {
  ServingModel m = chinese_llama();
  EXPECT_FALSE(m.prompt_tokenizer.legacy);
  json ref = reference();
  ASSERT_EQ(ref["chat"].size(), 3u);
  for (const json& c : ref["chat"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    json body = {{"messages", c["messages"]}, {"max_tokens", 8}};
    ParseResult r = parse_chat_request(body.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
  }
}

TEST(ProtocolChatReference, CompletionPromptsMatchTransformers) {
  ServingModel m = chinese_llama();
  for (const json& c : reference()["completion"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    ParseResult r = parse_completion_request(json{{"prompt", c["prompt"]}, {"max_tokens", 8}}.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
  }
}

TEST(ProtocolChatReference, SpecialTextSplitsOutAndLegacyPrefixesEachSegment) {
  auto tok = load_tokenizer(kDir);
  PromptTokenizerOptions opts;
  opts.specials = {{"<s>", 1}, {"</s>", 2}};
  // Non-legacy: the segment after "<s>" has no dummy prefix; a plain
  // encode would give "▁Hi".
  std::vector<int32_t> hi_plain = tok->encode("Hi", false);
  std::vector<int32_t> got = encode_prompt(*tok, "<s>Hi</s>", false, opts);
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got.front(), 1);
  EXPECT_EQ(got.back(), 2);
  EXPECT_NE(std::vector<int32_t>(got.begin() + 1, got.end() - 1), hi_plain);
  opts.legacy = true;
  std::vector<int32_t> legacy = encode_prompt(*tok, "<s>Hi</s>", false, opts);
  EXPECT_EQ(std::vector<int32_t>(legacy.begin() + 1, legacy.end() - 1), hi_plain);
  // No special text: exactly the tokenizer's encode, BOS included.
  EXPECT_EQ(encode_prompt(*tok, "Hi", true, opts), tok->encode("Hi", true));
  // add_special_tokens with special text: one BOS in front, then the split.
  std::vector<int32_t> with_bos = encode_prompt(*tok, "<s>Hi", true, opts);
  EXPECT_EQ(with_bos[0], 1);
  EXPECT_EQ(with_bos[1], 1);
}

}  // namespace
}  // namespace pagoda
