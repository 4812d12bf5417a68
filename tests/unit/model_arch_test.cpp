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
// The others (Mistral's and Gemma 2's sliding windows, Qwen3's q/k norms,
// MoE, GPT-2, Falcon, BLOOM, ...) are refused at load with a message naming
// the architecture (see ModelConfig); they are issue 18's work.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/unit/model_test_helpers.h"
#include "tests/unit/reference_cases.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

void check_arch(const std::string& name, double bound) {
  const std::string dir = shared_model("arch/" + name);
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  CpuModel m(dir, 80, 1024);
  int cases = 0;
  check_reference_cases(m, ref, "arch " + name, bound, 24, cases);
  EXPECT_EQ(cases, 4);
}

TEST(ModelArch, Llama3RopeScalingMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-llama3"));
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c.head_dim, 8);
  check_arch("tiny-random-llama3", 2e-4);
}

// Until issue 18 grows the model definition, the other assets are refused
// when their config is read, naming the architecture.
TEST(ModelArch, OtherArchitecturesAreRefusedByName) {
  const std::pair<const char*, const char*> others[] = {
      {"tiny-random-bloom", "BloomForCausalLM"},
      {"tiny-random-falcon", "FalconForCausalLM"},
      {"tiny-random-gemma2", "Gemma2ForCausalLM"},
      {"tiny-random-gpt-neox", "GPTNeoXForCausalLM"},
      {"tiny-random-gpt2", "GPT2LMHeadModel"},
      {"tiny-random-gptj", "GPTJForCausalLM"},
      {"tiny-random-mistral", "MistralForCausalLM"},
      {"tiny-random-mixtral", "MixtralForCausalLM"},
      {"tiny-random-phi3", "Phi3ForCausalLM"},
      {"tiny-random-qwen2-moe", "Qwen2MoeForCausalLM"},
      {"tiny-random-qwen3", "Qwen3ForCausalLM"}};
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
