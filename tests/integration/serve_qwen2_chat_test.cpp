// `pagoda serve` on tiny-random-qwen2-chat (Qwen2, 151,936 logits rows,
// Qwen2.5's byte-level BPE tokenizer.json and chat template) against HF
// transformers' reference.json: chat and completion prompts tokenize to the
// reference's prompt_ids (usage.prompt_tokens is their count) and greedy
// decoding gives the reference's ids and text; streamed chunks are whole
// UTF-8 characters (serve_stream_bytes_test.cpp streams byte-level pieces);
// --chat-template replaces the model's own template.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <memory>

#include "tests/integration/serve_reference_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

struct Qwen2Chat {
  static constexpr const char* kDir = "tiny-random-qwen2-chat";
  static constexpr const char* kName = "qwen";
};
using ServeQwen2Chat = ServeReferenceModel<Qwen2Chat>;

TEST_F(ServeQwen2Chat, ChatCompletionsMatchTransformers) {
  const json ref = reference();
  ASSERT_EQ(ref["chat"].size(), 3u);
  for (const json& c : ref["chat"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    // The rendered template's <|im_start|>/<|im_end|> text became those ids
    // (27, 33 and 55 prompt tokens), nothing added.
    expect_chat_case_matches(port(), *tok_, c);
  }
}

TEST_F(ServeQwen2Chat, CompletionsMatchTransformers) {
  const json ref = reference();
  ASSERT_EQ(ref["completion"].size(), 5u);
  for (const json& c : ref["completion"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    expect_completion_case_matches(port(), *tok_, c, c["prompt"]);
  }
}

// Special-token text in a completion prompt is split out by the tokenizer's
// own added-token matching: the text right after "<|im_end|>" ("\n") is
// encoded as itself (198), not merged with anything by the Qwen2 regex.
TEST_F(ServeQwen2Chat, SpecialTextInCompletionPromptIsSplitByTheTokenizer) {
  const json zh = reference()["chat"][1];
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", zh["rendered"]}, {"max_tokens", 1}, {"temperature", 0}, {"return_token_ids", true}});
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"], zh["prompt_ids"]);
  EXPECT_EQ(r["usage"]["prompt_tokens"], zh["prompt_ids"].size());
}

// --chat-template FILE replaces tokenizer_config.json's template: Qwen2's
// template (qwen2-instruct.jinja) adds "You are a helpful assistant." as the
// system prompt where Qwen2.5's adds "You are Qwen, created by Alibaba
// Cloud. ...". The expected ids are put together from the reference's own:
// the "en" chat's system turn (that very system prompt) and the "multi"
// chat from its first user turn on.
TEST(ServeQwen2ChatTemplateOverride, ChatTemplateFileReplacesTheModelsTemplate) {
  std::vector<std::string> args = reference_server_args(Qwen2Chat::kDir, Qwen2Chat::kName);
  args.push_back("--chat-template");
  args.push_back(shared_path("chat_templates/qwen2-instruct.jinja"));
  PagodaServer server(args);
  const json ref = read_json_file(model_path(Qwen2Chat::kDir) + "/reference.json");
  const json& en = ref["chat"][0];
  const json& multi = ref["chat"][2];
  ASSERT_EQ(multi["messages"][0]["role"], "user");  // no system message: the template adds one
  const auto en_ids = en["prompt_ids"].get<std::vector<int32_t>>();
  const auto multi_ids = multi["prompt_ids"].get<std::vector<int32_t>>();
  // "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
  const std::vector<int32_t> system_turn(en_ids.begin(), en_ids.begin() + 11);
  ASSERT_EQ(system_turn.back(), 198);
  ASSERT_EQ(system_turn[9], 151645);
  // The "multi" prompt from its first "<|im_start|>user".
  auto user = std::find(multi_ids.begin() + 1, multi_ids.end(), 151644);
  ASSERT_NE(user, multi_ids.end());
  ASSERT_EQ(*(user + 1), 872);  // "user"
  std::vector<int32_t> want = system_turn;
  want.insert(want.end(), user, multi_ids.end());

  json r = post_json(server.port(), "/v1/chat/completions",
                     {{"messages", multi["messages"]}, {"max_tokens", 2}, {"temperature", 0}, {"return_token_ids", true}});
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(r["usage"]["prompt_tokens"], want.size());
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace pagoda::testing_http
