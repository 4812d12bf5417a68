// Chat prompts end to end through the protocol layer with the real pieces:
// Chinese-LLaMA-2's SentencePiece tokenizer and the Llama-2-chat template
// from its tokenizer_config.json, against the prompt ids HF transformers
// produced (shared/models/tiny-random-chinese-llama/reference.json): the
// template's "<s>"/"</s>" text becomes BOS/EOS ids, no second BOS is added,
// and text after a special token gets no "▁" prefix (legacy=false).
#include <gtest/gtest.h>

#include <fstream>

#include "engine/chat/chat_template.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "server/chat_renderer.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"

namespace pagoda {
namespace {

using nlohmann::json;

const std::string kDir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-chinese-llama";
const std::string kQwenDir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat";

json reference(const std::string& dir = kDir) {
  std::ifstream in(dir + "/reference.json");
  return json::parse(in);
}

ServingModel serving_model(const std::string& dir) {
  ServingModel m;
  m.served_model_name = std::string("m");  // (GCC 12 -Wrestrict false positive on a literal)
  m.max_model_len = 4096;
  auto tok = load_tokenizer(dir);
  TokenizerConfig tc = TokenizerConfig::from_dir(dir);
  m.tokenizer = tok;
  auto tmpl = std::make_shared<ChatTemplate>(tc.chat_template);
  m.has_chat_template = true;
  m.chat_renderer = make_chat_renderer(tmpl, tc.bos_token, tc.eos_token);
  return m;
}

ServingModel chinese_llama() { return serving_model(kDir); }

TEST(ProtocolChatReference, PromptIdsMatchTransformers) {
  ServingModel m = chinese_llama();
  EXPECT_FALSE(TokenizerConfig::from_dir(kDir).legacy);
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
  // (The reference is kept: iterating reference()["completion"] directly
  // walked a destroyed temporary and checked nothing.)
  const json ref = reference();
  ASSERT_EQ(ref["completion"].size(), 5u);
  for (const json& c : ref["completion"]) {
    const std::string prompt = c["prompt"];
    SCOPED_TRACE(prompt);
    ParseResult r = parse_completion_request(json{{"prompt", prompt}, {"max_tokens", 8}}.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    const auto& ids = std::get<ParsedRequest>(r).prompt_token_ids;
    if (prompt == "法国的首都是") {
      // The score tie sentencepiece and HF's tokenizers break differently
      // (tokenizer_config_test.cpp): the same text, sentencepiece's ids.
      EXPECT_EQ(ids, m.tokenizer->encode(prompt, true));
      EXPECT_EQ(m.tokenizer->decode(ids, true), prompt);
      EXPECT_EQ(m.tokenizer->decode(c["prompt_ids"].get<std::vector<int32_t>>(), true), prompt);
    } else {
      EXPECT_EQ(ids, c["prompt_ids"].get<std::vector<int32_t>>());
    }
  }
}

#ifdef PAGODA_HAVE_BPE
// Qwen2.5's template writes <|im_start|>/<|im_end|> text; the byte-level BPE
// tokenizer's own added-token matching splits it out (a marker-based split
// in the server let the Qwen2 regex merge the marker with the text after
// "<|im_end|>").
TEST(ProtocolChatReference, QwenPromptIdsMatchTransformers) {
  ServingModel m = serving_model(kQwenDir);
  const json ref = reference(kQwenDir);
  ASSERT_EQ(ref["chat"].size(), 3u);
  for (const json& c : ref["chat"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    ParseResult r = parse_chat_request(json{{"messages", c["messages"]}, {"max_tokens", 8}}.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
    // The rendered text as a completion prompt: the same ids (Qwen2 adds no
    // BOS with add_special_tokens).
    r = parse_completion_request(json{{"prompt", c["rendered"]}, {"max_tokens", 8}}.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
  }
  for (const json& c : ref["completion"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    ParseResult r = parse_completion_request(json{{"prompt", c["prompt"]}, {"max_tokens", 8}}.dump(), m);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
  }
  // "<|im_end|>" then text: the text's ids are those of the text alone.
  EXPECT_EQ(encode_prompt(*m.tokenizer, "<|im_end|>\nHello", false),
            (std::vector<int32_t>{151645, 198, 9707}));
  EXPECT_EQ(encode_prompt(*m.tokenizer, "<|im_end|>Hello", true), (std::vector<int32_t>{151645, 9707}));
}
// {"role":"assistant","content":null} (OpenAI allows it, e.g. beside
// tool_calls) renders as "" the way vLLM does, instead of the template's
// "'<|im_start|>' + role + '\n' + content" failing on None.
TEST(ProtocolChatReference, NullAssistantContentRendersAsEmpty) {
  ServingModel m = serving_model(kQwenDir);
  const json with_null = json::array({{{"role", "user"}, {"content", "hi"}},
                                      {{"role", "assistant"}, {"content", nullptr}},
                                      {{"role", "user"}, {"content", "go"}}});
  ParseResult r = parse_chat_request(json{{"messages", with_null}, {"max_tokens", 4}}.dump(), m);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
  const ParsedRequest& got = std::get<ParsedRequest>(r);
  // The template's text with content "" (Qwen2's default system turn first).
  EXPECT_EQ(got.prompts.front().text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
            "<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n");
  json with_empty = with_null;
  with_empty[1]["content"] = "";
  ParseResult e = parse_chat_request(json{{"messages", with_empty}, {"max_tokens", 4}}.dump(), m);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(e)) << std::get<OpenAIError>(e).body();
  EXPECT_EQ(got.prompt_token_ids, std::get<ParsedRequest>(e).prompt_token_ids);
}
#endif  // PAGODA_HAVE_BPE

TEST(ProtocolChatReference, SpecialTextSplitsOutAndLegacyPrefixesEachSegment) {
  TokenizerConfig tc = TokenizerConfig::from_dir(kDir);
  SentencePieceTokenizer tok(kDir + "/tokenizer.model", tc);
  // Non-legacy: the segment after "<s>" has no dummy prefix; a plain
  // encode would give "▁Hi".
  std::vector<int32_t> hi_plain = tok.encode("Hi", false);
  std::vector<int32_t> got = encode_prompt(tok, "<s>Hi</s>", false);
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got.front(), 1);
  EXPECT_EQ(got.back(), 2);
  EXPECT_NE(std::vector<int32_t>(got.begin() + 1, got.end() - 1), hi_plain);
  tc.legacy = true;
  SentencePieceTokenizer legacy_tok(kDir + "/tokenizer.model", tc);
  std::vector<int32_t> legacy = encode_prompt(legacy_tok, "<s>Hi</s>", false);
  ASSERT_GE(legacy.size(), 3u);
  EXPECT_EQ(legacy.front(), 1);
  EXPECT_EQ(legacy.back(), 2);
  EXPECT_EQ(std::vector<int32_t>(legacy.begin() + 1, legacy.end() - 1), hi_plain);
  // No special text: exactly the tokenizer's encode, BOS included.
  EXPECT_EQ(encode_prompt(tok, "Hi", true), tok.encode("Hi", true));
  EXPECT_EQ(encode_prompt(tok, "Hi", false), tok.encode("Hi", false));
  // add_special_tokens with special text: one BOS in front, then the split
  // (HF: "<s>" in the text is BOS too, so two).
  std::vector<int32_t> with_bos = encode_prompt(tok, "<s>Hi", true);
  ASSERT_GE(with_bos.size(), 3u);
  EXPECT_EQ(with_bos[0], 1);
  EXPECT_EQ(with_bos[1], 1);
  EXPECT_EQ(std::vector<int32_t>(with_bos.begin() + 2, with_bos.end()),
            std::vector<int32_t>(got.begin() + 1, got.end() - 1));
}

// The Llama-2-chat template ("content.strip()") with null or missing
// content: rendered as "", as vLLM does; a content of another type stays a
// 400 naming the message.
TEST(ProtocolChatReference, NullOrMissingContentIsEmptyOtherTypesAre400) {
  ServingModel m = chinese_llama();
  auto parse = [&](const json& assistant) {
    json msgs = json::array({{{"role", "user"}, {"content", "hi"}}, assistant, {{"role", "user"}, {"content", "go"}}});
    return parse_chat_request(json{{"messages", msgs}, {"max_tokens", 4}}.dump(), m);
  };
  ParseResult empty = parse({{"role", "assistant"}, {"content", ""}});
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(empty)) << std::get<OpenAIError>(empty).body();
  const std::string& text = std::get<ParsedRequest>(empty).prompts.front().text;
  EXPECT_EQ(text, "<s>[INST] hi [/INST]  </s><s>[INST] go [/INST]");
  for (const json& a : {json{{"role", "assistant"}, {"content", nullptr}}, json{{"role", "assistant"}}}) {
    SCOPED_TRACE(a.dump());
    ParseResult r = parse(a);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r)) << std::get<OpenAIError>(r).body();
    EXPECT_EQ(std::get<ParsedRequest>(r).prompts.front().text, text);
    EXPECT_EQ(std::get<ParsedRequest>(r).prompt_token_ids, std::get<ParsedRequest>(empty).prompt_token_ids);
  }
  for (const json& bad : {json(5), json(true), json::object()}) {
    SCOPED_TRACE(bad.dump());
    ParseResult r = parse({{"role", "assistant"}, {"content", bad}});
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(r));
    const OpenAIError& err = std::get<OpenAIError>(r);
    EXPECT_EQ(err.status, 400);
    EXPECT_NE(err.body().find("messages[1].content must be a string"), std::string::npos) << err.body();
  }
}

}  // namespace
}  // namespace pagoda
