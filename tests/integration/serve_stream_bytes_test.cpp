// Streaming detokenization over HTTP SSE with Qwen2's byte-level BPE: a
// completion whose tokens split CJK characters and emoji into byte-level
// pieces (and hold an id past the tokenizer's 151,665 tokens, which a model
// with 151,936 logits rows can produce) streams as whole UTF-8 characters
// in every chunk, joined equal to the non-streamed text. The output ids
// come from a hand-made checkpoint (successor_model.h) whose greedy chain
// is the real tokenizer's encoding of the text: the random tiny models'
// greedy outputs repeat whole-character tokens.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>

#include "tests/integration/serve_reference_util.h"
#include "tests/integration/successor_model.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

// 龘 (U+9F98) and 𠀀 (U+20000) have no token of their own in Qwen2's
// vocabulary (their UTF-8 bytes are spread over byte-level pieces); 春天,
// 🦙 (U+1F999), 圹 (U+5739) and ！ do.
const std::string kText = "春天\xE9\xBE\x98\xF0\x9F\xA6\x99\xE5\x9C\xB9\xF0\xA0\x80\x80！";
constexpr int32_t kPastTokenizer = 151900;  // < 151,936 logits rows, > 151,665 tokens
constexpr int32_t kNewline = 198;           // the prompts' last token

class ServeStreamBytes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string qwen_dir = model_path("tiny-random-qwen2-chat");
    tok_ = load_tokenizer(qwen_dir);
    text_ids_ = new std::vector<int32_t>(tok_->encode(kText, false));
    // The chain: "\n", then the text's ids with the past-the-tokenizer id
    // right after the first byte-level piece that is not a whole character.
    chain_ = new std::vector<int32_t>{kNewline};
    bool inserted = false;
    for (int32_t id : *text_ids_) {
      chain_->push_back(id);
      if (!inserted && partial(id)) {
        chain_->push_back(kPastTokenizer);
        inserted = true;
      }
    }
    model_ = new SuccessorModel(qwen_dir, *chain_, 151936);
    server_ = new PagodaServer({model_->dir(), "--served-model-name", "succ", "--dtype", "float32"});
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
    delete model_;
    delete chain_;
    delete text_ids_;
    tok_.reset();
  }
  // A byte-level piece that is not a whole character: decoded alone, it
  // gives U+FFFD (the text has no U+FFFD of its own).
  static bool partial(int32_t id) {
    return tok_->decode(std::vector<int32_t>{id}, false).find(test::kReplacement) != std::string::npos;
  }
  static std::vector<int32_t> generated() { return std::vector<int32_t>(chain_->begin() + 1, chain_->end()); }

  static std::shared_ptr<Tokenizer> tok_;
  static std::vector<int32_t>* text_ids_;
  static std::vector<int32_t>* chain_;
  static SuccessorModel* model_;
  static PagodaServer* server_;
};
std::shared_ptr<Tokenizer> ServeStreamBytes::tok_;
std::vector<int32_t>* ServeStreamBytes::text_ids_ = nullptr;
std::vector<int32_t>* ServeStreamBytes::chain_ = nullptr;
SuccessorModel* ServeStreamBytes::model_ = nullptr;
PagodaServer* ServeStreamBytes::server_ = nullptr;

TEST_F(ServeStreamBytes, TheChainSplitsCharactersIntoByteTokens) {
  // The premise: distinct ids (the model maps each to one successor), most
  // of them byte-level pieces that are not characters on their own.
  std::vector<int32_t> sorted = *chain_;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  ASSERT_LE(chain_->size(), static_cast<size_t>(SuccessorModel::kHidden));
  // 龘 and 𠀀 are spread over byte-level pieces (🦙 and 圹 are tokens).
  for (const char* c : {"\xE9\xBE\x98", "\xF0\xA0\x80\x80"}) {
    const std::vector<int32_t> ids = tok_->encode(c, false);
    EXPECT_GE(ids.size(), 2u) << c;
    for (int32_t id : ids) EXPECT_TRUE(partial(id)) << c << " " << id;
  }
  EXPECT_EQ(tok_->decode(*text_ids_, true), kText);
  EXPECT_NE(std::find(chain_->begin(), chain_->end(), kPastTokenizer), chain_->end());
}

TEST_F(ServeStreamBytes, CompletionStreamsWholeCharacters) {
  const std::vector<int32_t> gen = generated();
  json body = {{"prompt", "\n"}, {"max_tokens", gen.size()}, {"temperature", 0}, {"return_token_ids", true}};
  json r = post_json(server_->port(), "/v1/completions", body);
  ASSERT_EQ(r["choices"][0]["prompt_token_ids"], json::array({kNewline}));
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), gen);
  // The id past the tokenizer adds no text (HF skips it) and breaks nothing.
  EXPECT_EQ(r["choices"][0]["text"], kText);

  StreamChunks s = stream_chunks(server_->port(), "/v1/completions", body);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_TRUE(s.done);
  expect_whole_characters(s);
  EXPECT_EQ(s.joined, r["choices"][0]["text"].get<std::string>());
  std::vector<int32_t> streamed_ids;
  for (const auto& ids : s.token_ids) streamed_ids.insert(streamed_ids.end(), ids.begin(), ids.end());
  EXPECT_EQ(streamed_ids, gen);
  // After every chunk, the text so far is exactly the whole characters of
  // the ids so far: a character split over byte pieces comes out with its
  // last byte, not before (decode gives U+FFFD for the unfinished tail).
  std::string text_so_far;
  std::vector<int32_t> ids_so_far;
  for (size_t i = 0; i < s.texts.size(); ++i) {
    text_so_far += s.texts[i];
    ids_so_far.insert(ids_so_far.end(), s.token_ids[i].begin(), s.token_ids[i].end());
    std::string whole = tok_->decode(ids_so_far, true);
    while (whole.size() >= 3 && whole.compare(whole.size() - 3, 3, test::kReplacement) == 0) whole.resize(whole.size() - 3);
    EXPECT_EQ(text_so_far, whole) << "after chunk " << i;
  }
}

TEST_F(ServeStreamBytes, ChatStreamsWholeCharacters) {
  const std::vector<int32_t> gen = generated();
  json body = {{"messages", {{{"role", "user"}, {"content", "写一首关于春天的诗。"}}}},
               {"max_tokens", gen.size()},
               {"temperature", 0},
               {"return_token_ids", true}};
  json r = post_json(server_->port(), "/v1/chat/completions", body);
  ASSERT_EQ(r["choices"][0]["prompt_token_ids"].back(), kNewline);  // "<|im_start|>assistant\n"
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), gen);
  EXPECT_EQ(r["choices"][0]["message"]["content"], kText);

  StreamChunks s = stream_chunks(server_->port(), "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_TRUE(s.done);
  expect_whole_characters(s);
  EXPECT_EQ(s.joined, kText);
}

}  // namespace
}  // namespace pagoda::testing_http
