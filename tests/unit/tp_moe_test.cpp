// Tensor parallelism of the mixture-of-experts MLP on the CPU backend
// (engine/model/llama.h; vLLM's FusedMoE sharding: every rank holds all
// experts, each cut by its intermediate units, the router replicated, one
// all-reduce of the partial outputs):
//  * tiny-random-mixtral (4 experts of 96 units, top-2) and
//    tiny-random-qwen2-moe (4 experts of 48 units, top-2, a shared expert of
//    96 units behind its sigmoid gate) at tensor_parallel_size 2 against HF
//    transformers' float32 reference (shared/models/arch/*/reference.json):
//    last-position logits of each prompt within 1e-5 relative L2 (the TP=1
//    ModelArch bound, ten times tighter than issue 18's 1e-4; the
//    reference's bf16 rotary frequencies reproduced as there) and its 24
//    greedy ids decoded one token per step through the paged cache; every
//    step's logits equal TP=1's within 1e-5 (max |diff| / max |logit|).
//    TP=4 is not a split of these models (2 KV heads).
//  * each rank reads half of the experts' bytes and all of the router's;
//  * an expert width that tp does not divide is refused naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/dist/communicator.h"
#include "engine/model/llama.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

std::string arch_dir(const std::string& name) { return shared_model("arch/" + name); }

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// The reference's rotary frequencies went through bf16 (model_arch_test.cpp).
ModelConfig reference_config(const std::string& dir) {
  ModelConfig c = ModelConfig::from_dir(dir);
  c.rope_inv_freq_bf16 = true;
  return c;
}

void check_tp2_against_reference(const std::string& name) {
  const std::string dir = arch_dir(name);
  const json ref = read_json(dir + "/reference.json");
  const ModelConfig cfg = reference_config(dir);
  auto one = cpu_executor(dir, cfg, 1);
  auto two = cpu_executor(dir, cfg, 2);
  EXPECT_NE(two->describe().find("tensor parallel 2"), std::string::npos) << two->describe();
  const int64_t V = two->vocab_size();
  double worst_ref = 0, worst_tp1 = 0;
  int cases = 0;
  for (const json& c : ref["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(V));
    ASSERT_EQ(greedy.size(), 24u);
    std::vector<float> base;
    size_t step = 0;
    // Every step of TP=2's decoding also runs on TP=1, teacher-forced with
    // TP=2's ids.
    const std::vector<int32_t> decoded = greedy_ids(
        *two, ids, greedy.size(), [&](const ForwardBatch& batch, const std::vector<float>& got) {
          one->execute(batch, base);
          if (step == 0) {
            const double e = rel_l2(got.data(), want);
            EXPECT_LT(e, 1e-5) << name << " TP=2, prompt of " << ids.size() << " tokens";
            worst_ref = std::max(worst_ref, e);
          }
          ASSERT_EQ(got.size(), base.size());
          const double d = max_rel_diff(got, base);
          EXPECT_LT(d, 1e-5) << name << " TP=2 vs TP=1, prompt of " << ids.size()
                             << " tokens, step " << step;
          worst_tp1 = std::max(worst_tp1, d);
          ++step;
        });
    EXPECT_EQ(step, greedy.size());
    EXPECT_EQ(decoded, greedy) << name << " TP=2, prompt of " << ids.size() << " tokens";
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  std::printf(
      "[tp moe] %s TP=2: worst relative L2 vs HF %.3g over %d prompts, vs TP=1 %.3g (max |diff| / "
      "max)\n",
      name.c_str(), worst_ref, cases, worst_tp1);
}

TEST(TpMoe, MixtralTp2MatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(arch_dir("tiny-random-mixtral"));
  ASSERT_EQ(c.moe_intermediate_size % 2, 0);
  check_tp2_against_reference("tiny-random-mixtral");
}

TEST(TpMoe, Qwen2MoeSharedExpertTp2MatchesTransformers) {
  const ModelConfig c = ModelConfig::from_dir(arch_dir("tiny-random-qwen2-moe"));
  ASSERT_EQ(c.moe_intermediate_size % 2, 0);
  ASSERT_EQ(c.shared_expert_intermediate_size % 2, 0);
  check_tp2_against_reference("tiny-random-qwen2-moe");
}

// Every rank of a TP=2 load reads half of the sharded tensors' bytes (q/k/v
// and their biases, o, each expert's gate/up/down, the shared expert's) and
// all of the replicated ones (embedding, norms, lm_head, router, shared
// expert gate).
TEST(TpMoe, EachRankReadsOnlyItsExpertShards) {
  for (const char* name : {"tiny-random-mixtral", "tiny-random-qwen2-moe"}) {
    const std::string dir = arch_dir(name);
    const ModelConfig c = ModelConfig::from_dir(dir);
    auto be1 = make_cpu_backend(1);
    LlamaModel whole(c, *be1);
    whole.load_weights(dir);
    const auto full = whole.load_stats();
    const size_t el = 2;  // BF16 on disk
    const int64_t H = c.hidden_size, D = c.head_dim, E = c.num_experts;
    const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
    const int64_t I = c.moe_intermediate_size, Is = c.shared_expert_intermediate_size;
    const int64_t sharded = (Hq + 2 * Hk) * D * H + (c.attention_bias ? (Hq + 2 * Hk) * D : 0) +
                            H * Hq * D + E * 3 * I * H + 3 * Is * H;
    EXPECT_EQ(full.sharded_bytes, static_cast<size_t>(sharded * c.num_hidden_layers) * el) << name;
    const int64_t replicated =
        2 * c.vocab_size * H + H + c.num_hidden_layers * (2 * H + E * H + (Is > 0 ? H : 0));
    EXPECT_EQ(full.replicated_bytes, static_cast<size_t>(replicated) * el) << name;
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

// The model's config.json with `field` set to `value`, parsed.
ModelConfig edited(const std::string& name, const char* field, int64_t value) {
  json j = read_json(arch_dir(name) + "/config.json");
  j[field] = value;
  return ModelConfig::from_json_text(j.dump(), name + " (edited)");
}

std::string refusal(const std::string& name, const ModelConfig& c, int tp) {
  try {
    cpu_executor(arch_dir(name), c, tp);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

// vLLM refuses an expert width that tp does not divide; so does the
// executor (before loading anything), naming tensor_parallel_size and the
// config field that holds the width.
TEST(TpMoe, ExpertWidthNotDividedByTpIsRefused) {
  const ModelConfig mixtral = edited("tiny-random-mixtral", "intermediate_size", 95);
  ASSERT_EQ(mixtral.moe_intermediate_size, 95);
  std::string m = refusal("tiny-random-mixtral", mixtral, 2);
  EXPECT_NE(
      m.find("tensor_parallel_size 2 does not divide intermediate_size 95 of MixtralForCausalLM"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("every expert's"), std::string::npos) << m;
  EXPECT_THROW(validate_tensor_parallel(mixtral, 2), std::runtime_error);
  EXPECT_NO_THROW(validate_tensor_parallel(mixtral, 1));

  m = refusal("tiny-random-qwen2-moe", edited("tiny-random-qwen2-moe", "moe_intermediate_size", 47),
              2);
  EXPECT_NE(
      m.find(
          "tensor_parallel_size 2 does not divide moe_intermediate_size 47 of Qwen2MoeForCausalLM"),
      std::string::npos)
      << m;
  m = refusal("tiny-random-qwen2-moe",
              edited("tiny-random-qwen2-moe", "shared_expert_intermediate_size", 95), 2);
  EXPECT_NE(m.find("tensor_parallel_size 2 does not divide shared_expert_intermediate_size 95 of "
                   "Qwen2MoeForCausalLM"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("shared expert"), std::string::npos) << m;
  // 3 divides both widths (48, 96) but not the 4 heads: the heads' error.
  m = refusal("tiny-random-qwen2-moe", ModelConfig::from_dir(arch_dir("tiny-random-qwen2-moe")), 3);
  EXPECT_NE(m.find("tensor_parallel_size 3 does not divide num_attention_heads 4"),
            std::string::npos)
      << m;
  // Qwen2-MoE's intermediate_size is the dense MLP's, and every layer here
  // is sparse (mlp_only_layers is refused): it need not split.
  EXPECT_NO_THROW(
      validate_tensor_parallel(edited("tiny-random-qwen2-moe", "intermediate_size", 127), 2));
}

}  // namespace
}  // namespace pagoda::test
