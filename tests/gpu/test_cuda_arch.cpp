// Issue 18's architectures on the CUDA backend. Of the ops beyond the Llama
// set the CUDA backend implements only the per-head q/k RMSNorm (Qwen3,
// gpu/head_norm.cu); for the others (sliding window, attention and final
// soft-capping, GELU(tanh) MLP, embedding scaling, MoE, LayerNorm, ungated
// GELU, residual add, partial/interleaved/no rotary, ALiBi) LlamaModel
// refuses the model at construction, naming what is missing. Phi-3 (fused
// checkpoint tensors, Llama ops only) and Qwen3 run; their bf16 logits are
// held against HF's float32 reference as HF's own bf16 run is
// (reference.json's bf16_rel_l2: 0.006 to 0.008), under 2e-2, prompts up to
// 200 tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/llama.h"
#include "tests/gpu/gpu_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

using namespace gputest;

std::string arch_dir(const std::string& name) { return test::shared_model("arch/" + name); }

TEST(CudaArch, ModelsNeedingMissingOpsAreRefusedByName) {
  PAGODA_REQUIRE_GPU();
  const std::pair<const char*, const char*> cases[] = {
      {"tiny-random-mistral", "sliding-window attention"},
      {"tiny-random-mixtral", "mixture-of-experts MLP"},
      {"tiny-random-qwen2-moe", "mixture-of-experts MLP"},
      {"tiny-random-gemma2", "attention logit soft-capping"},
      {"tiny-random-gpt-neox", "LayerNorm"},
      {"tiny-random-gpt2", "partial or no rotary embedding"},
      {"tiny-random-falcon", "GELU MLP"},
      {"tiny-random-gptj", "interleaved (GPT-J) rotary embedding"},
      {"tiny-random-bloom", "ALiBi attention"}};
  for (const auto& [name, op] : cases) {
    auto b = make_cuda_backend(0, DType::BF16);
    const ModelConfig c = ModelConfig::from_dir(arch_dir(name));
    try {
      LlamaModel m(c, *b);
      ADD_FAILURE() << name << " was accepted on " << b->name();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("does not implement"), std::string::npos) << e.what();
    }
  }
}

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

}  // namespace
}  // namespace pagoda
