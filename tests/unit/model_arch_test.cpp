// Architectures of shared/models/arch/ (issue 18's assets: tiny random
// models written with HF transformers, reference.json per model) that the
// one model definition loads today, on the CPU backend against HF's float32
// logits: last-position logits of each reference prompt within 1e-4
// relative L2, and the reference's 24 greedy ids decoded one token per step
// through the paged cache.
//  * tiny-random-llama3: LlamaForCausalLM with Llama 3.1's rope_scaling
//    (rope_type llama3, factor 8, low/high_freq_factor 1/4, original 8192),
//    rope_theta 500000, an explicit head_dim and tied embeddings.
// Bound: 1e-4 relative L2, except that this reference's rotary frequencies
// went through bf16 (its model was loaded in bf16 and upcast, buffers
// included): rounding our inv_freq to bf16 reproduces it to 4e-7 on every
// prompt (checked by hand, 2026-12-01), while the float inv_freq that vLLM
// and this engine use differs from it by 7e-6, 3e-5 and 1.2e-4 at 5, 33 and
// 200 tokens. The bound is 2e-4 for that reason; a wrong scaling rule is
// 100x that (no llama3 scaling: 1.1e-2 at 200 tokens).
// The other architectures are checked with the reference's bf16 rotary
// frequencies reproduced (ModelConfig::rope_inv_freq_bf16; every reference
// here was made from a model cast to bf16 and upcast, inv_freq buffer
// included): then every prompt matches within 6e-7 (measured 2026-12-02),
// so the bound is 1e-5, ten times tighter than issue 18's 1e-4. With float
// frequencies (what serving uses) the 200-token prompts differ from these
// references by 5e-4 to 2.4e-3 for theta 1e4..1e6, all from the frequencies.
// Mistral (sliding window 24 < the 200-token prompt), Qwen3 (q/k norm),
// Phi-3 (fused qkv/gate_up), Mixtral (top-2 of 4 experts), Gemma 2 (soft-
// capping, alternating windows, sandwich norms) and Qwen2-MoE (shared
// expert). GPT-2, GPT-NeoX, GPT-J, Falcon and BLOOM are
// still refused at load with a message naming the architecture.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/unit/model_test_helpers.h"
#include "tests/unit/reference_cases.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

// rope_bf16: round the rotary frequencies to bf16 as the reference's model
// had them (ModelConfig::rope_inv_freq_bf16), so that every other part of
// the forward is held to float32 rounding.
void check_arch(const std::string& name, double bound, bool rope_bf16 = true) {
  const std::string dir = shared_model("arch/" + name);
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  ModelConfig cfg = ModelConfig::from_dir(dir);
  cfg.rope_inv_freq_bf16 = rope_bf16;
  CpuModel m(dir, cfg, 80, 1024);
  int cases = 0;
  check_reference_cases(m, ref, "arch " + name, bound, 24, cases);
  EXPECT_EQ(cases, 4);
}

TEST(ModelArch, Llama3RopeScalingMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-llama3"));
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c.head_dim, 8);
  check_arch("tiny-random-llama3", 2e-4, /*rope_bf16=*/false);
  // With the reference's bf16 frequencies reproduced: float32 rounding only.
  check_arch("tiny-random-llama3", 1e-5);
}

TEST(ModelArch, MistralSlidingWindowMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-mistral"));
  ASSERT_EQ(c.layer_sliding_window, (std::vector<int64_t>{24, 24}));
  check_arch("tiny-random-mistral", 1e-5);
}

// The window matters for these prompts: the same model attending to every
// position misses the 200-token reference by far more than the bound, and
// so does a window one position too wide or too narrow.
TEST(ModelArch, MistralWithoutItsWindowDoesNotMatch) {
  const std::string dir = shared_model("arch/tiny-random-mistral");
  std::ifstream in(dir + "/reference.json");
  const json ref = json::parse(in);
  const json& c = ref["cases"][3];
  const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 200u);
  const auto want = c["last_logits"].get<std::vector<double>>();
  for (int64_t w : {int64_t{0}, int64_t{23}, int64_t{25}}) {
    ModelConfig cfg = ModelConfig::from_dir(dir);
    cfg.rope_inv_freq_bf16 = true;
    cfg.layer_sliding_window.assign(cfg.layer_sliding_window.size(), w);
    CpuModel m(dir, cfg, 80, 1024);
    const std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, 13));
    EXPECT_GT(rel_l2(logits.data(), want), 1e-3) << "window " << w;
  }
}

TEST(ModelArch, Qwen3QkNormMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-qwen3"));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 32);  // explicit, != hidden / heads
  check_arch("tiny-random-qwen3", 1e-5);
}

TEST(ModelArch, Phi3FusedProjectionsMatchTransformers) {
  EXPECT_TRUE(ModelConfig::from_dir(shared_model("arch/tiny-random-phi3")).fused_checkpoint);
  check_arch("tiny-random-phi3", 1e-5);
}

TEST(ModelArch, MixtralTop2MatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-mixtral"));
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  check_arch("tiny-random-mixtral", 1e-5);
}

TEST(ModelArch, Gemma2MatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-gemma2"));
  EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{24, 0}));
  EXPECT_EQ(c.attn_logit_softcap, 50.0);
  EXPECT_EQ(c.final_logit_softcap, 30.0);
  check_arch("tiny-random-gemma2", 1e-5);
}

TEST(ModelArch, Qwen2MoeSharedExpertMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-qwen2-moe"));
  EXPECT_EQ(c.shared_expert_intermediate_size, 96);
  EXPECT_FALSE(c.norm_topk_prob);
  check_arch("tiny-random-qwen2-moe", 1e-5);
}

// The architectures not landed yet are refused when their config is read,
// naming the architecture.
TEST(ModelArch, OtherArchitecturesAreRefusedByName) {
  const std::pair<const char*, const char*> others[] = {
      {"tiny-random-bloom", "BloomForCausalLM"},
      {"tiny-random-falcon", "FalconForCausalLM"},
      {"tiny-random-gpt-neox", "GPTNeoXForCausalLM"},
      {"tiny-random-gpt2", "GPT2LMHeadModel"},
      {"tiny-random-gptj", "GPTJForCausalLM"}};
  for (const auto& [dir, arch] : others) {
    try {
      ModelConfig::from_dir(shared_model(std::string("arch/") + dir));
      ADD_FAILURE() << dir << " loaded";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("unsupported architecture '") + arch + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace pagoda::test
