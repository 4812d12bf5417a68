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
// buffers reproduced (RefRope: every reference here was made from a model
// cast to bf16 and upcast, its rotary buffers included; GPT-J's buffer is
// the sin/cos table, the others' the inverse frequencies): then every
// prompt matches within 6e-7 (measured 2026-12-02), so the bound is 1e-5,
// ten times tighter than issue 18's 1e-4. With float frequencies (what
// serving uses) the 200-token prompts differ from these references by up to
// 2.4e-3 (theta 1e4..1e6), all from the frequencies.
//  * Mistral: sliding window 24 < the 200-token prompt; Qwen3: q/k norm and
//    an explicit head_dim; Phi-3: fused qkv/gate_up; Mixtral: top-2 of 4
//    experts; Gemma 2: soft-capping, alternating windows, sandwich norms,
//    (1+w) norms, GELU(tanh), embedding scale; Qwen2-MoE: shared expert.
//  * GPT-NeoX: parallel residual, 25 % rotary; GPT-2: learned positions,
//    Conv1D weights; Falcon: multi-query, parallel; GPT-J: interleaved
//    rotary on 8 dims, lm_head bias; BLOOM: ALiBi, embedding LayerNorm.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/unit/checkpoint_rewrite.h"
#include "tests/unit/model_test_helpers.h"
#include "tests/unit/reference_cases.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

// How the reference's rotary table is reproduced: float (what serving
// uses), or with the buffer its bf16-cast model held rounded to bf16: the
// inverse frequencies (every rotary model here but GPT-J) or GPT-J's
// precomputed sin/cos table (embed_positions).
enum class RefRope { Float, InvFreqBf16, TableBf16 };

ModelConfig reference_config(const std::string& dir, RefRope rope) {
  ModelConfig cfg = ModelConfig::from_dir(dir);
  cfg.rope_inv_freq_bf16 = rope == RefRope::InvFreqBf16;
  cfg.rope_table_bf16 = rope == RefRope::TableBf16;
  return cfg;
}

json read_reference(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  EXPECT_TRUE(in.good()) << dir;
  return json::parse(in);
}

void check_arch(const std::string& name, double bound, RefRope rope = RefRope::InvFreqBf16) {
  const std::string dir = shared_model("arch/" + name);
  const json ref = read_reference(dir);
  CpuModel m(dir, reference_config(dir, rope), 80, 1024);
  int cases = 0;
  check_reference_cases(m, ref, "arch " + name, bound, 24, cases);
  EXPECT_EQ(cases, 4);
}

TEST(ModelArch, Llama3RopeScalingMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-llama3"));
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c.head_dim, 8);
  check_arch("tiny-random-llama3", 2e-4, RefRope::Float);
  // With the reference's bf16 frequencies reproduced: float32 rounding only.
  check_arch("tiny-random-llama3", 1e-5);
}

TEST(ModelArch, MistralSlidingWindowMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-mistral"));
  ASSERT_EQ(c.layer_sliding_window, (std::vector<int64_t>{24, 24}));
  check_arch("tiny-random-mistral", 1e-5);
}

TEST(ModelArch, Qwen3QkNormMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-qwen3"));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 32);  // explicit, != hidden / heads
  check_arch("tiny-random-qwen3", 1e-5);
}

TEST(ModelArch, Phi3FusedProjectionsMatchTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-phi3"));
  EXPECT_EQ(c.fused_qkv, "qkv_proj");
  EXPECT_TRUE(c.fused_gate_up);
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

TEST(ModelArch, GptNeoXParallelResidualPartialRotaryMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-gpt-neox"));
  EXPECT_TRUE(c.parallel_residual && c.parallel_two_norms && c.layer_norm);
  EXPECT_EQ(c.rotary_dims(), 4);  // 25 % of head_dim 16
  check_arch("tiny-random-gpt-neox", 1e-5);
}

TEST(ModelArch, Gpt2LearnedPositionsMatchTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-gpt2"));
  EXPECT_TRUE(c.learned_positions);
  EXPECT_EQ(c.rotary_dims(), 0);
  check_arch("tiny-random-gpt2", 1e-5, RefRope::Float);
}

TEST(ModelArch, FalconMultiQueryParallelMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-falcon"));
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_TRUE(c.parallel_residual && !c.parallel_two_norms);
  check_arch("tiny-random-falcon", 1e-5);
}

TEST(ModelArch, GptjInterleavedRotaryMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-gptj"));
  EXPECT_TRUE(c.rope_interleaved);
  EXPECT_EQ(c.rotary_dims(), 8);
  check_arch("tiny-random-gptj", 1e-5, RefRope::TableBf16);
}

TEST(ModelArch, BloomAlibiMatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(shared_model("arch/tiny-random-bloom"));
  EXPECT_TRUE(c.alibi && c.embedding_norm);
  check_arch("tiny-random-bloom", 1e-5, RefRope::Float);
}

// Each option matters for these references: switched off (or changed) it
// misses the reference by far more than the 1e-5 bound above, so the tests
// above would catch it being ignored. Measured 2026-12-02 (1- and 200-token
// prompts): 3e-4 (Gemma 2 without attention soft-capping) to 1.1 (without
// the embedding scale). Not distinguishable here: Gemma 2's
// query_pre_attn_scalar (16 = head_dim in this asset).
TEST(ModelArch, EachOptionChangesTheLogits) {
  struct Case {
    const char* model;
    const char* change;
    RefRope rope;
    void (*apply)(ModelConfig&);
    // Tensors the changed model has no parameter for (names holding it),
    // left out of a copy of the checkpoint: loading them is an error, as in
    // vLLM.
    const char* unused = nullptr;
  };
  const Case cases[] = {
      {"tiny-random-mistral", "no sliding window", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.layer_sliding_window.assign(2, 0); }},
      {"tiny-random-mistral", "window 23", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.layer_sliding_window.assign(2, 23); }},
      {"tiny-random-mistral", "window 25", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.layer_sliding_window.assign(2, 25); }},
      {"tiny-random-gemma2", "no attention soft-cap", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.attn_logit_softcap = 0; }},
      {"tiny-random-gemma2", "no final soft-cap", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.final_logit_softcap = 0; }},
      {"tiny-random-gemma2", "no sliding window", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.layer_sliding_window.assign(2, 0); }},
      {"tiny-random-gemma2", "no embedding scale", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.embedding_scale = 1; }},
      {"tiny-random-qwen3", "no q/k norm", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.qk_norm = false; }, "_norm.weight"},
      {"tiny-random-mixtral", "top-k not renormalised", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.norm_topk_prob = false; }},
      {"tiny-random-qwen2-moe", "top-k renormalised", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.norm_topk_prob = true; }},
      {"tiny-random-qwen2-moe", "no shared expert", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; }, "shared_expert"},
      {"tiny-random-gptj", "rotate-half", RefRope::TableBf16,
       [](ModelConfig& c) { c.rope_interleaved = false; }},
      {"tiny-random-gpt-neox", "full rotary", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.rotary_dim = -1; }},
      {"tiny-random-gpt-neox", "one norm", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.parallel_two_norms = false; }, "post_attention_layernorm"},
      {"tiny-random-bloom", "no ALiBi", RefRope::Float, [](ModelConfig& c) { c.alibi = false; }},
      {"tiny-random-falcon", "tanh GELU", RefRope::InvFreqBf16,
       [](ModelConfig& c) { c.hidden_act = "gelu_new"; }},
      {"tiny-random-gpt2", "erf GELU", RefRope::Float,
       [](ModelConfig& c) { c.hidden_act = "gelu"; }},
  };
  for (const Case& k : cases) {
    const std::string dir = shared_model(std::string("arch/") + k.model);
    const json ref = read_reference(dir);
    ModelConfig cfg = reference_config(dir, k.rope);
    k.apply(cfg);
    TempModelDir trimmed("arch_trimmed");
    if (k.unused) {
      RawCheckpoint ck = read_safetensors(dir + "/model.safetensors");
      std::erase_if(ck, [&](const auto& t) { return t.first.find(k.unused) != std::string::npos; });
      write_safetensors(trimmed.str() + "/model.safetensors", ck);
    }
    CpuModel m(k.unused ? trimmed.str() : dir, cfg, 80, 1024);
    double worst = 0;
    for (const json& c : ref["cases"]) {
      const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = c["last_logits"].get<std::vector<double>>();
      const auto max_blocks = static_cast<int32_t>((ids.size() + 15) / 16);
      const std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, max_blocks));
      worst = std::max(worst, rel_l2(logits.data(), want));
    }
    EXPECT_GT(worst, 1e-4) << k.model << " with " << k.change;
  }
}

// Architectures outside the table are refused when their config is read,
// naming the architecture and listing the supported ones.
TEST(ModelArch, OtherArchitecturesAreRefusedByName) {
  for (const char* arch : {"OPTForCausalLM", "PhiForCausalLM", "MambaForCausalLM"}) {
    const std::string text =
        std::string(R"({"architectures": [")") + arch +
        R"("], "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 512})";
    try {
      ModelConfig::from_json_text(text, "test");
      ADD_FAILURE() << arch << " loaded";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("unsupported architecture '") + arch + "'"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("BloomForCausalLM"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pagoda::test
