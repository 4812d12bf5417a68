// Issue 18's architectures on the CUDA backend. It implements every op
// beyond the Llama set: per-head q/k RMSNorm (gpu/head_norm.cu), sliding
// window, attention soft-capping and ALiBi in every attention kernel
// (gpu/attention_*.cu), GELU(tanh) gating, ungated GELU, soft-capping,
// scaling, residual add and LayerNorm (gpu/elementwise_ext.cu), partial /
// interleaved / no rotary (gpu/rope_cache.cu), the mixture-of-experts MLP
// (gpu/cuda_moe.cpp, gpu/moe.cu); the op-level tests against the CPU backend
// are test_cuda_arch_ops.cpp, test_cuda_attention_ext.cpp and
// test_cuda_moe.cpp. Phi-3 and Qwen3's bf16 logits are held against HF's
// float32 reference under 2e-2; every other architecture's (Mixtral and
// Qwen2-MoE included) under twice the relative L2 of HF's own bf16 run
// (reference.json's bf16_rel_l2), with its greedy ids decoded one token per
// step through the paged cache (decode kernel) where the logits' top-2
// margin leaves no doubt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/llama.h"
#include "tests/gpu/gpu_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model_test_helpers.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda {
namespace {

using namespace gputest;

std::string arch_dir(const std::string& name) { return test::shared_model("arch/" + name); }

// head_rms_norm against the CPU backend's on the same (dtype-rounded) input.
TEST(CudaArch, HeadRmsNormMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t T = 7, Hq = 4, Hk = 2, D = 32, W = (Hq + 2 * Hk) * D;
  for (DType dt : {DType::F32, DType::BF16}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const auto x = random_vec(rng, static_cast<size_t>(T * W), dt, -3.f, 3.f);
    const auto qw = random_vec(rng, static_cast<size_t>(D), dt, 0.5f, 1.5f);
    const auto kw = random_vec(rng, static_cast<size_t>(D), dt, 0.5f, 1.5f);
    auto cpu = make_cpu_backend(1);
    Tensor cx = upload(*cpu, DType::F32, {T, W}, x), cq = upload(*cpu, DType::F32, {D}, qw),
           ck = upload(*cpu, DType::F32, {D}, kw);
    cpu->head_rms_norm(cx, cq, ck, Hq, Hk, D, 1e-6f);
    const auto want = to_double(download(*cpu, cx));
    auto b = make_cuda_backend(0, dt);
    Tensor gx = upload(*b, dt, {T, W}, x), gq = upload(*b, dt, {D}, qw),
           gk = upload(*b, dt, {D}, kw);
    b->head_rms_norm(gx, gq, gk, Hq, Hk, D, 1e-6f);
    const double e = rel_l2(download(*b, gx), want);
    EXPECT_LT(e, dt == DType::F32 ? 1e-6 : 1e-2) << dtype_name(dt);
    for (Tensor* t : {&cx, &cq, &ck}) cpu->free(*t);
    for (Tensor* t : {&gx, &gq, &gk}) b->free(*t);
  }
}

void check_bf16_logits(const std::string& name) {
  const std::string dir = arch_dir(name);
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  GpuModel m(dir, DType::BF16, 80, 1024);
  int cases = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto max_blocks = static_cast<int32_t>((ids.size() + 15) / 16);
    const std::vector<float> got = m.run(test::one_seq_batch(ids, 0, 0, max_blocks));
    const double e = test::rel_l2(got.data(), want);
    std::printf("[cuda %s] prompt of %zu tokens: relative L2 %.3g (HF bf16: %.3g)\n", name.c_str(),
                ids.size(), e, c["bf16_rel_l2"].get<double>());
    EXPECT_LT(e, 2e-2) << name << " prompt of " << ids.size() << " tokens";
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

TEST(CudaArch, Phi3Bf16LogitsMatchTransformers) {
  PAGODA_REQUIRE_GPU();
  check_bf16_logits("tiny-random-phi3");
}

TEST(CudaArch, Qwen3Bf16LogitsMatchTransformers) {
  PAGODA_REQUIRE_GPU();
  check_bf16_logits("tiny-random-qwen3");
}

// How the reference's rotary table is reproduced (tests/unit/model_arch_test.cpp
// explains: each reference was made from a bf16-cast model, rotary buffers
// included; with float frequencies the 200-token prompts differ by up to
// 2.4e-3 from the frequencies alone).
enum class RefRope { None, InvFreqBf16, TableBf16 };

// Last-position logits of each reference prompt within twice HF's own bf16
// error (bf16_rel_l2 of that prompt), then the reference's 24 greedy ids
// decoded one token per step. A step's id must equal the reference's when
// our top-2 margin exceeds 8 x the allowed error per logit (bound x the
// logits' RMS: a relative-L2 error spread evenly; 8 allows a 4x
// concentration on each of the two logits); below that a different id is
// within bf16 noise, and the comparison stops there (the contexts differ
// from then on).
void check_arch_bf16(const std::string& name, RefRope rope) {
  const std::string dir = arch_dir(name);
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  ModelConfig cfg = ModelConfig::from_dir(dir);
  cfg.rope_inv_freq_bf16 = rope == RefRope::InvFreqBf16;
  cfg.rope_table_bf16 = rope == RefRope::TableBf16;
  GpuModel m(dir, cfg, DType::BF16, 80, 1024);
  const auto V = static_cast<int64_t>(m.config.vocab_size);
  int cases = 0, checked_steps = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    const double bound = 2 * c["bf16_rel_l2"].get<double>();
    const size_t prompt_len = ids.size();
    const auto max_blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(test::one_seq_batch(ids, 0, 0, max_blocks));
    const double e = test::rel_l2(logits.data(), want);
    std::printf("[cuda %s] prompt of %zu tokens: relative L2 %.3g (bound %.3g)\n", name.c_str(),
                prompt_len, e, bound);
    EXPECT_LT(e, bound) << name << " prompt of " << prompt_len << " tokens";
    for (size_t step = 0; step < greedy.size(); ++step) {
      const int32_t next = test::argmax_row(logits, 0, V);
      std::vector<float> sorted(logits.begin(), logits.begin() + V);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      double ss = 0;
      for (int64_t i = 0; i < V; ++i)
        ss += static_cast<double>(logits[static_cast<size_t>(i)]) * logits[static_cast<size_t>(i)];
      const double per_logit = bound * std::sqrt(ss / static_cast<double>(V));
      const double margin = static_cast<double>(sorted[0]) - sorted[1];
      if (next != greedy[step]) {
        EXPECT_LE(margin, 8 * per_logit)
            << name << " prompt of " << prompt_len << " tokens: greedy step " << step << " gave "
            << next << ", HF " << greedy[step] << " with a top-2 margin of " << margin;
        std::printf(
            "[cuda %s] prompt of %zu tokens: greedy step %zu differs within bf16 noise "
            "(margin %.3g); compared up to there\n",
            name.c_str(), prompt_len, step, margin);
        break;
      }
      ++checked_steps;
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(test::one_seq_batch({next}, pos, 0, max_blocks));
    }
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  std::printf("[cuda %s] %d greedy steps equal to HF's\n", name.c_str(), checked_steps);
}

TEST(CudaArch, Llama3Bf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-llama3", RefRope::InvFreqBf16);
}

TEST(CudaArch, MistralSlidingWindowBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-mistral", RefRope::InvFreqBf16);
}

TEST(CudaArch, MixtralBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-mixtral", RefRope::InvFreqBf16);
}

TEST(CudaArch, Qwen2MoeBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-qwen2-moe", RefRope::InvFreqBf16);
}

TEST(CudaArch, Gemma2Bf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-gemma2", RefRope::InvFreqBf16);
}

TEST(CudaArch, GptNeoXBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-gpt-neox", RefRope::InvFreqBf16);
}

TEST(CudaArch, Gpt2Bf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-gpt2", RefRope::None);
}

TEST(CudaArch, FalconBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-falcon", RefRope::InvFreqBf16);
}

TEST(CudaArch, GptJBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-gptj", RefRope::TableBf16);
}

TEST(CudaArch, BloomBf16MatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-bloom", RefRope::None);
}

TEST(CudaArch, Phi3Qwen3Bf16GreedyMatchesTransformers) {
  PAGODA_REQUIRE_GPU();
  check_arch_bf16("tiny-random-phi3", RefRope::InvFreqBf16);
  check_arch_bf16("tiny-random-qwen3", RefRope::InvFreqBf16);
}

}  // namespace
}  // namespace pagoda
