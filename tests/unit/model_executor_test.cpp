// make_model_executor on the CPU backend: KV sizing, greedy steps through
// ModelExecutor::execute vs llama2.c, dummy weights, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_executor.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

ExecutorOptions stories_opts() {
  ExecutorOptions o;
  o.model_dir = shared_model("stories260K");
  o.device = "cpu";
  o.max_model_len = 512;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 256;
  o.num_threads = 2;
  return o;
}

TEST(ModelExecutor, CpuSizesKvCacheAndDecodesGreedy) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("stories260K"));
  auto ex = make_model_executor(c, stories_opts());
  EXPECT_NE(ex->describe().find("cpu fp32"), std::string::npos) << ex->describe();
  EXPECT_EQ(ex->vocab_size(), 512);
  EXPECT_EQ(ex->block_size(), 16);
  // 256 MiB / (2*5*16*4*8*4 B) = 13107 blocks, capped at 4 seqs x 512/16.
  EXPECT_EQ(ex->num_kv_blocks(), 4 * 32);

  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  const auto vec = nlohmann::json::parse(in);
  const auto prompt = vec["cases"][1]["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = vec["cases"][1]["greedy_ids"].get<std::vector<int32_t>>();
  std::vector<float> logits;
  ex->execute(one_seq_batch(prompt, 0, 3, 4), logits);
  ASSERT_EQ(logits.size(), 512u);
  auto pos = static_cast<int32_t>(prompt.size());
  for (size_t i = 0; i < 40; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(next, want[i]) << "step " << i;
    ex->execute(one_seq_batch({next}, pos++, 3, 4), logits);
  }
}

TEST(ModelExecutor, KvBudgetOverrideAndErrors) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("stories260K"));
  ExecutorOptions o = stories_opts();
  o.kv_cache_memory_bytes = 20480 * 40;  // 40 blocks: more than one sequence (32)
  EXPECT_EQ(make_model_executor(c, o)->num_kv_blocks(), 40);
  o.num_gpu_blocks_override = 77;
  EXPECT_EQ(make_model_executor(c, o)->num_kv_blocks(), 77);
  o.num_gpu_blocks_override = 0;
  o.kv_cache_memory_bytes = 20480 * 10;  // 10 blocks < 32 needed for max_model_len 512
  try {
    make_model_executor(c, o);
    FAIL() << "expected not enough memory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("max_model_len"), std::string::npos) << e.what();
  }
  o = stories_opts();
  o.device = "tpu";
  EXPECT_THROW(make_model_executor(c, o), std::runtime_error);
  o = stories_opts();
  o.dtype = "int4";
  EXPECT_THROW(make_model_executor(c, o), std::runtime_error);
  o = stories_opts();
  o.model_dir = "/nonexistent";
  EXPECT_THROW(make_model_executor(c, o), std::runtime_error);
#ifndef PAGODA_HAVE_CUDA
  o = stories_opts();
  o.device = "cuda";
  try {
    make_model_executor(c, o);
    FAIL() << "expected no-CUDA error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
#endif
}

TEST(ModelExecutor, RejectsBadBatchAndKeepsWorking) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("stories260K"));
  auto ex = make_model_executor(c, stories_opts());
  std::vector<float> logits, again;
  ex->execute(one_seq_batch({1, 400}, 0, 0, 1), logits);
  EXPECT_THROW(ex->execute(one_seq_batch({1, 512}, 0, 0, 1), again), std::invalid_argument);  // id == vocab
  EXPECT_THROW(ex->execute(one_seq_batch({1}, 0, 500, 1), again), std::invalid_argument);     // block outside cache
  EXPECT_THROW(ex->execute(one_seq_batch({1}, 600, 0, 40), again), std::invalid_argument);    // position >= max_model_len
  ForwardBatch empty;
  EXPECT_THROW(ex->execute(empty, again), std::invalid_argument);
  ex->execute(one_seq_batch({1, 400}, 0, 0, 1), again);
  EXPECT_EQ(logits, again);
}

TEST(ModelExecutor, DummyWeightsFromConfigAlone) {
  // A preset shape scaled down: Qwen2-style GQA with bias, random weights.
  const ModelConfig c = ModelConfig::from_json_text(
      R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "rope_theta": 1000000.0})",
      "dummy");
  ExecutorOptions o;
  o.device = "cpu";
  o.load_format = "dummy";
  o.seed = 7;
  o.max_model_len = 128;
  o.max_num_seqs = 2;
  o.max_num_batched_tokens = 64;
  o.num_threads = 1;
  auto a = make_model_executor(c, o);
  auto b = make_model_executor(c, o);
  std::vector<float> la, lb;
  a->execute(one_seq_batch({5, 6, 7}, 0, 0, 1), la);
  b->execute(one_seq_batch({5, 6, 7}, 0, 0, 1), lb);
  ASSERT_EQ(la.size(), 300u);
  EXPECT_EQ(la, lb);  // same seed, same weights
  for (float v : la) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(*std::max_element(la.begin(), la.end()), *std::min_element(la.begin(), la.end()));
}

}  // namespace
}  // namespace pagoda::test
