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
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

void check_arch(const std::string& name, double bound) {
  const std::string dir = shared_model("arch/" + name);
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  CpuModel m(dir, 80, 1024);
  const auto V = static_cast<size_t>(m.config.vocab_size);
  int cases = 0;
  double worst = 0;
  for (const json& c : ref["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), V);
    const auto max_blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, max_blocks));
    const double e = rel_l2(logits.data(), want);
    EXPECT_LT(e, bound) << name << " prompt of " << ids.size() << " tokens";
    worst = std::max(worst, e);
    std::printf("[arch] %s prompt of %zu tokens: relative L2 %.3g\n", name.c_str(), ids.size(), e);
    std::vector<int32_t> got;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const auto next = argmax_row(logits, 0, static_cast<int64_t>(V));
      got.push_back(next);
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(one_seq_batch({next}, pos, 0, max_blocks));
    }
    EXPECT_EQ(got, greedy) << name << " prompt of " << c["prompt_ids"].size() << " tokens";
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  std::printf("[arch] %s: worst relative L2 error %.3g over %d prompts\n", name.c_str(), worst,
              cases);
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
