// Tensor parallelism on the CPU backend: greedy ids of stories260K at TP=2
// equal TP=1 and llama2.c's run.c (shared/testvectors/stories260K_greedy.json);
// each rank reads only its shards (checkpoint bytes per rank); the clear
// errors for sizes that do not fit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/dist/communicator.h"
#include "engine/dist/rank_threads.h"
#include "engine/model/llama.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

TEST(TpStories260K, GreedyTp2EqualsTp1AndLlama2c) {
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  ASSERT_TRUE(in.good());
  const json vec = json::parse(in);
  auto one = cpu_executor(shared_model("stories260K"), 1, 1);
  auto two = cpu_executor(shared_model("stories260K"), 2, 2);
  size_t cases = 0, tokens = 0;
  for (const json& c : vec["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got2 = greedy_ids(*two, prompt, want.size());
    EXPECT_EQ(got2, want) << "TP=2, case '" << c["prompt"] << "'";
    EXPECT_EQ(greedy_ids(*one, prompt, want.size()), got2)
        << "TP=1 vs TP=2, case '" << c["prompt"] << "'";
    ++cases;
    tokens += want.size();
  }
  EXPECT_EQ(cases, 3u);
  std::printf("[tp] stories260K: %zu greedy ids at TP=2 equal TP=1 and run.c\n", tokens);
}

// Every rank of a TP=N load reads 1/N of the sharded tensors' bytes (q/k/v,
// o, gate/up, down) and all of the replicated ones (embedding, norms).
TEST(TpLoad, EachRankReadsOnlyItsShards) {
  for (const char* name : {"stories260K", "tiny-random-qwen2"}) {
    const std::string dir = shared_model(name);
    const ModelConfig c = ModelConfig::from_dir(dir);
    auto be1 = make_cpu_backend(1);
    LlamaModel whole(c, *be1);
    whole.load_weights(dir);
    const auto full = whole.load_stats();
    ASSERT_GT(full.sharded_bytes, 0u);
    // stories260K is F32 on disk, tiny-random-qwen2 BF16: bytes are the file's.
    const size_t el = c.torch_dtype == DType::F32 ? 4 : 2;
    const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
    const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
    const int64_t per_layer =
        (Hq + 2 * Hk) * D * H + (c.attention_bias ? (Hq + 2 * Hk) * D : 0) + H * Hq * D + 3 * I * H;
    EXPECT_EQ(full.sharded_bytes, static_cast<size_t>(per_layer * c.num_hidden_layers) * el)
        << name;
    const int tp = 2;
    auto comms = make_cpu_communicators(tp);
    for (int r = 0; r < tp; ++r) {
      auto be = make_cpu_backend(1);
      LlamaModel shard(c, *be, TensorParallel{r, tp}, comms[static_cast<size_t>(r)].get());
      shard.load_weights(dir);
      EXPECT_EQ(shard.load_stats().sharded_bytes * tp, full.sharded_bytes) << name << " rank " << r;
      EXPECT_EQ(shard.load_stats().replicated_bytes, full.replicated_bytes)
          << name << " rank " << r;
    }
  }
}

// A bad batch is refused before it reaches the ranks (no rank waits in an
// all-reduce for another that threw), and the executor keeps working.
TEST(TpErrors, BadBatchHarmsNothing) {
  auto one = cpu_executor(shared_model("stories260K"), 1);
  auto two = cpu_executor(shared_model("stories260K"), 2);
  std::vector<float> logits, want;
  EXPECT_THROW(two->execute(one_seq_batch({1, 9999}, 0, 0, 1), logits),
               std::invalid_argument);  // id >= vocab
  ForwardBatch no_blocks = one_seq_batch({1, 2}, 0, 0, 1);
  no_blocks.block_tables = {4096};  // outside the cache
  EXPECT_THROW(two->execute(no_blocks, logits), std::invalid_argument);
  two->execute(one_seq_batch({1, 403, 407}, 0, 0, 1), logits);
  one->execute(one_seq_batch({1, 403, 407}, 0, 0, 1), want);
  ASSERT_EQ(logits.size(), want.size());
  EXPECT_LT(max_rel_diff(logits, want), 1e-5);
}

TEST(TpErrors, SizesThatDoNotFit) {
  const std::string dir = shared_model("stories260K");  // 8 heads, 4 KV heads, I = 172
  auto message = [&](int tp) {
    try {
      cpu_executor(dir, tp);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(0).find("tensor_parallel_size must be >= 1, got 0"), std::string::npos)
      << message(0);
  EXPECT_NE(message(-2).find("tensor_parallel_size must be >= 1, got -2"), std::string::npos);
  EXPECT_NE(message(3).find("tensor_parallel_size 3 does not divide num_attention_heads 8"),
            std::string::npos)
      << message(3);
  EXPECT_NE(message(8).find("tensor_parallel_size 8 does not divide num_key_value_heads 4"),
            std::string::npos)
      << message(8);
  // A model, backend and communicator that disagree are a bug, caught too.
  const ModelConfig c = ModelConfig::from_dir(dir);
  auto be = make_cpu_backend(1);
  EXPECT_THROW(LlamaModel(c, *be, TensorParallel{0, 2}, nullptr), std::invalid_argument);
  auto comms = make_cpu_communicators(2);
  EXPECT_THROW(LlamaModel(c, *be, TensorParallel{0, 2}, comms[1].get()), std::invalid_argument);
  EXPECT_THROW(LlamaModel(c, *be, TensorParallel{2, 2}, comms[0].get()), std::invalid_argument);
#ifndef PAGODA_HAVE_CUDA
  // A CPU-only build has no CUDA ranks at all.
  ExecutorOptions o;
  o.model_dir = dir;
  o.device = "cuda";
  o.max_model_len = 64;
  o.tensor_parallel_size = 2;
  EXPECT_THROW(make_model_executor(c, o), std::runtime_error);
#endif
}

}  // namespace
}  // namespace pagoda::test
