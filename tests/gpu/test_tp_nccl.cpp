// Tensor parallelism on CUDA over NCCL (issue 7's device acceptance; passed
// on 2 H200s, docs/PERFORMANCE.md): TP=2 vs TP=1 bf16
// logits on tiny-random-llama (prefill, then decode steps replayed from CUDA
// graphs, teacher-forced with TP=1's greedy ids) within bf16 tolerance;
// stories260K fp32 greedy ids at TP=2 (and 4 where 4 GPUs exist) equal
// llama2.c's; the mixture-of-experts models (tiny-random-mixtral,
// tiny-random-qwen2-moe with its shared expert; experts cut by their
// intermediate units on every rank, vLLM's FusedMoE sharding) at TP=2: bf16
// logits equal TP=1's within bf16 tolerance over a prefill and graphed
// decode steps, and fp32 last-position logits within 1e-4 relative L2 of HF
// transformers' (reference.json) with its 24 greedy ids; asking for more
// ranks than GPUs, or TP on CUDA without NCCL, is a clear error. Skipped
// (with the reason) where the GPUs are missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

std::string model(const char* name) { return std::string(PAGODA_SHARED_DIR) + "/models/" + name; }

ExecutorOptions tp_options(const std::string& dir, const char* dtype, int tp) {
  ExecutorOptions o;
  o.model_dir = dir;
  o.device = "cuda";
  o.dtype = dtype;
  o.block_size = 16;
  o.max_model_len = 512;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 512;
  o.num_gpu_blocks_override = 64;
  o.tensor_parallel_size = tp;
  return o;
}

ForwardBatch one_seq(const std::vector<int32_t>& ids, int32_t start) {
  ForwardBatch b;
  const auto n = static_cast<int32_t>(ids.size());
  b.input_ids = ids;
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(start + i);
    b.slot_mapping.push_back(start + i);  // blocks 0, 1, 2, ... in order
  }
  b.query_start_loc = {0, n};
  b.context_lens = {start + n};
  b.max_blocks_per_seq = 32;
  for (int32_t k = 0; k < 32; ++k) b.block_tables.push_back(k);
  b.logits_indices = {n - 1};
  return b;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

#define PAGODA_REQUIRE_GPUS(n)                                                                      \
  do {                                                                                              \
    if (::pagoda::cuda::device_count() < (n))                                                       \
      GTEST_SKIP() << "needs " << (n) << " GPUs, " << ::pagoda::cuda::device_count() << " present"; \
  } while (0)

#ifdef PAGODA_HAVE_NCCL
TEST(CudaTensorParallel, Tp2LogitsMatchTp1Bf16) {
  PAGODA_REQUIRE_GPUS(2);
  const std::string dir = model("tiny-random-llama");
  const ModelConfig cfg = ModelConfig::from_dir(dir);
  auto one = make_model_executor(cfg, tp_options(dir, "bfloat16", 1));
  auto two = make_model_executor(cfg, tp_options(dir, "bfloat16", 2));
  EXPECT_GT(two->num_cuda_graphs(), 0);
  std::vector<int32_t> prompt = {1};
  for (int32_t i = 0; i < 30; ++i) prompt.push_back((i * 53 + 7) % static_cast<int32_t>(cfg.vocab_size));
  std::vector<float> a, b;
  one->execute(one_seq(prompt, 0), a);
  two->execute(one_seq(prompt, 0), b);
  auto pos = static_cast<int32_t>(prompt.size());
  for (int step = 0; step < 10; ++step) {
    std::vector<double> ref(a.begin(), a.end());
    const double err = gputest::rel_l2(b, ref);
    EXPECT_LT(err, 2e-2) << "step " << step;  // bf16 weights/activations, different sum order
    const int32_t next = argmax(a);          // teacher-forced with TP=1's id
    one->execute(one_seq({next}, pos), a);    // decode: replayed from a CUDA graph
    two->execute(one_seq({next}, pos), b);
    ++pos;
  }
}

TEST(CudaTensorParallel, Stories260KGreedyFp32EqualsLlama2c) {
  PAGODA_REQUIRE_GPUS(2);
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json vec = nlohmann::json::parse(in);
  const std::string dir = model("stories260K");
  const ModelConfig cfg = ModelConfig::from_dir(dir);
  for (int tp : {2, 4}) {
    if (cuda::device_count() < tp) continue;
    auto ex = make_model_executor(cfg, tp_options(dir, "float32", tp));
    for (const auto& c : vec["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
      std::vector<float> logits;
      ex->execute(one_seq(prompt, 0), logits);
      std::vector<int32_t> got;
      auto pos = static_cast<int32_t>(prompt.size());
      for (size_t i = 0; i < want.size() && pos < 512; ++i) {
        got.push_back(argmax(logits));
        if (i + 1 < want.size()) ex->execute(one_seq({got.back()}, pos++), logits);
      }
      EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(got.size())))
          << "TP=" << tp << " case '" << c["prompt"] << "'";
    }
  }
}

// Mixtral (top-2 of 4 experts) and Qwen2-MoE (top-2 of 4, shared expert):
// TP=2's bf16 logits against TP=1's, teacher-forced with TP=1's greedy ids
// (decode steps replayed from CUDA graphs, whose MoE scratch and all-reduce
// are captured with the step).
TEST(CudaTensorParallel, MoeTp2LogitsMatchTp1Bf16) {
  PAGODA_REQUIRE_GPUS(2);
  for (const char* name : {"arch/tiny-random-mixtral", "arch/tiny-random-qwen2-moe"}) {
    const std::string dir = model(name);
    const ModelConfig cfg = ModelConfig::from_dir(dir);
    auto one = make_model_executor(cfg, tp_options(dir, "bfloat16", 1));
    auto two = make_model_executor(cfg, tp_options(dir, "bfloat16", 2));
    EXPECT_GT(two->num_cuda_graphs(), 0) << name;
    std::vector<int32_t> prompt = {1};
    for (int32_t i = 0; i < 40; ++i)
      prompt.push_back((i * 53 + 7) % static_cast<int32_t>(cfg.vocab_size));
    std::vector<float> a, b;
    one->execute(one_seq(prompt, 0), a);
    two->execute(one_seq(prompt, 0), b);
    auto pos = static_cast<int32_t>(prompt.size());
    for (int step = 0; step < 12; ++step) {
      std::vector<double> ref(a.begin(), a.end());
      const double err = gputest::rel_l2(b, ref);
      // bf16 weights and activations, a different summation order.
      EXPECT_LT(err, 2e-2) << name << " step " << step;
      const int32_t next = argmax(a);
      one->execute(one_seq({next}, pos), a);
      two->execute(one_seq({next}, pos), b);
      ++pos;
    }
  }
}

// fp32 at TP=2 against HF transformers' float32 reference, with the
// reference's bf16 rotary frequencies reproduced (test_cuda_arch.cpp): each
// prompt's last-position logits within issue 18's 1e-4 relative L2 and its
// 24 greedy ids decoded one token per step.
TEST(CudaTensorParallel, MoeTp2Fp32MatchesTransformers) {
  PAGODA_REQUIRE_GPUS(2);
  for (const char* name : {"arch/tiny-random-mixtral", "arch/tiny-random-qwen2-moe"}) {
    const std::string dir = model(name);
    std::ifstream in(dir + "/reference.json");
    ASSERT_TRUE(in.good()) << dir;
    const nlohmann::json ref = nlohmann::json::parse(in);
    ModelConfig cfg = ModelConfig::from_dir(dir);
    cfg.rope_inv_freq_bf16 = true;
    auto ex = make_model_executor(cfg, tp_options(dir, "float32", 2));
    int cases = 0;
    for (const auto& c : ref["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = c["last_logits"].get<std::vector<double>>();
      const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
      std::vector<float> logits;
      ex->execute(one_seq(prompt, 0), logits);
      const double err = gputest::rel_l2(logits, want);
      EXPECT_LT(err, 1e-4) << name << " prompt of " << prompt.size() << " tokens";
      std::printf("[cuda tp2 %s] prompt of %zu tokens: relative L2 %.3g\n", name, prompt.size(),
                  err);
      std::vector<int32_t> got;
      auto pos = static_cast<int32_t>(prompt.size());
      for (size_t i = 0; i < greedy.size(); ++i) {
        got.push_back(argmax(logits));
        if (i + 1 < greedy.size()) ex->execute(one_seq({got.back()}, pos++), logits);
      }
      EXPECT_EQ(got, greedy) << name << " prompt of " << prompt.size() << " tokens";
      ++cases;
    }
    EXPECT_EQ(cases, 4) << name;
  }
}
#endif

TEST(CudaTensorParallel, MoreRanksThanGpusOrNoNcclIsAClearError) {
  PAGODA_REQUIRE_GPU();
  const std::string dir = model("stories260K");  // 8 heads, 4 KV heads: TP=4 divides
  const ModelConfig cfg = ModelConfig::from_dir(dir);
  const int gpus = cuda::device_count();
  if (gpus >= 4) GTEST_SKIP() << gpus << " GPUs: TP=4 fits, nothing to refuse";
  try {
    make_model_executor(cfg, tp_options(dir, "float32", 4));
    FAIL() << "TP=4 accepted with " << gpus << " GPUs";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
#ifdef PAGODA_HAVE_NCCL
    EXPECT_NE(msg.find("needs 4 GPUs (one per rank) but " + std::to_string(gpus) + " are present"), std::string::npos)
        << msg;
#else
    EXPECT_NE(msg.find("needs NCCL"), std::string::npos) << msg;
#endif
  }
}

}  // namespace
}  // namespace pagoda
