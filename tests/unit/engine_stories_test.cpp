// The whole engine on a real model: stories260K on the CPU backend with its
// SentencePiece tokenizer, three prompts at once through a KV cache too small
// for all of them (waiting, preemption by recompute, chunked re-prefill),
// against llama2.c run.c's greedy ids (shared/testvectors/stories260K_greedy.json).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

TEST(EngineStories260K, ConcurrentGreedyMatchesLlama2cThroughPreemption) {
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json vec = nlohmann::json::parse(in);

  ExecutorOptions opts = test::stories_options();
  opts.max_model_len = 96;
  opts.max_num_batched_tokens = 64;
  opts.num_gpu_blocks_override = 6;  // 96 slots; the three need 1 + 5 + 5 + 3 x 64
  auto engine_ptr = test::make_test_engine(opts);
  Engine& engine = *engine_ptr;
  ASSERT_EQ(engine.num_kv_blocks(), 6);
  constexpr size_t kTokens = 64;  // of each reference (kept short for ASan runs)

  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> want;
  int i = 0;
  for (const nlohmann::json& c : vec["cases"]) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = c["prompt"].get<std::string>() + "#" + std::to_string(i++);
    req->prompt_token_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    want.push_back(c["greedy_ids"].get<std::vector<int32_t>>());
    want.back().resize(kTokens);
    req->sampling.temperature = 0.0f;
    req->sampling.ignore_eos = true;
    req->sampling.max_tokens = static_cast<int64_t>(want.back().size());
    req->output = std::make_shared<OutputChannel>();
    chans.push_back(req->output);
    engine.add_request(std::move(req));
  }
  ASSERT_EQ(chans.size(), 3u);
  engine.run_until_idle();
  for (size_t k = 0; k < chans.size(); ++k) {
    RequestOutput got = collect(*chans[k]);
    EXPECT_EQ(got.error, "");
    EXPECT_EQ(got.finish_reason, FinishReason::kLength);
    EXPECT_EQ(got.token_ids, want[k]) << "case " << k;
    EXPECT_FALSE(got.text.empty());
  }
  EngineStats st = engine.stats();
  EXPECT_GT(st.num_preemptions_total, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.generation_tokens_total, static_cast<int64_t>(3 * kTokens));
}

}  // namespace
}  // namespace pagoda
