// Rotary frequencies under config.json's rope_scaling (engine/model/rope.h):
// YaRN's ramp between the original and the interpolated frequencies, its
// attention factor on the cos/sin table, and the context length each
// scaling lets a model serve (vLLM's derived max_model_len). The formula's
// own source is transformers' _compute_yarn_parameters (and vLLM's
// YaRNScalingRotaryEmbedding); these tests check its properties and
// bounds, and compare against transformers' own values in
// tests/data/rope_reference.json (written by scripts/make_rope_reference.py
// on the device machine, where torch is; its "how" says how).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "engine/model/model_config.h"
#include "engine/model/rope.h"

namespace pagoda {
namespace {

ModelConfig config_with(const std::string& rope_scaling, int64_t max_position_embeddings = 32768) {
  // Qwen2.5-7B's shape: head_dim 128, rope_theta 1e6.
  return ModelConfig::from_json_text(
      R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
          "num_hidden_layers": 2, "num_attention_heads": 28, "num_key_value_heads": 4,
          "vocab_size": 1000, "rope_theta": 1000000.0, "max_position_embeddings": )" +
          std::to_string(max_position_embeddings) + R"(, "rope_scaling": )" + rope_scaling + "}",
      "t");
}

TEST(ModelRope, YarnKeepsFastDimensionsInterpolatesSlowOnesAndRampsBetween) {
  const ModelConfig plain = config_with("null");
  const ModelConfig yarn =
      config_with(R"({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})");
  ASSERT_EQ(yarn.rope_scaling.rope_type, "yarn");
  const std::vector<double> base = rope_inv_freq(plain), inv = rope_inv_freq(yarn);
  ASSERT_EQ(inv.size(), 64u);
  // The dimension d turns L * inv_freq[d] / (2 pi) times over L positions:
  // beta_fast = 32 turns or more keep their frequency, beta_slow = 1 or
  // fewer are divided by the factor.
  const double L = 32768.0;
  int kept = 0, scaled = 0, blended = 0;
  for (size_t j = 0; j < inv.size(); ++j) {
    const double turns = L * base[j] / (2.0 * M_PI);
    if (turns >= 32.0 * 1.2) {  // clear of the floored bound
      EXPECT_DOUBLE_EQ(inv[j], base[j]) << j;
      ++kept;
    } else if (turns <= 1.0 / 1.2) {
      EXPECT_NEAR(inv[j], base[j] / 4.0, 1e-18) << j;
      ++scaled;
    } else {
      EXPECT_LE(inv[j], base[j]) << j;
      EXPECT_GE(inv[j], base[j] / 4.0) << j;
      ++blended;
    }
    if (j > 0) {
      EXPECT_LT(inv[j], inv[j - 1]) << j;  // still strictly decreasing
    }
  }
  EXPECT_GT(kept, 10);
  EXPECT_GT(scaled, 10);
  EXPECT_GT(blended, 5);
  // Without original_max_position_embeddings the model's own length is
  // the original context.
  EXPECT_EQ(rope_inv_freq(config_with(R"({"type": "yarn", "factor": 4.0})")), inv);
  // A factor of 1 changes nothing (but rounding in the blend).
  const std::vector<double> one = rope_inv_freq(config_with(R"({"type": "yarn", "factor": 1.0})"));
  ASSERT_EQ(one.size(), base.size());
  for (size_t j = 0; j < one.size(); ++j) EXPECT_NEAR(one[j], base[j], 1e-15 * base[j]) << j;
  EXPECT_DOUBLE_EQ(rope_attention_factor(config_with(R"({"type": "yarn", "factor": 1.0})")), 1.0);
}

TEST(ModelRope, YarnScalesTheTableByItsAttentionFactor) {
  const ModelConfig yarn = config_with(R"({"type": "yarn", "factor": 4.0})");
  const double a = 0.1 * std::log(4.0) + 1.0;  // YaRN's mscale
  EXPECT_DOUBLE_EQ(rope_attention_factor(yarn), a);
  const std::vector<float> table = rope_cos_sin_table(yarn, 3);
  const std::vector<double> inv = rope_inv_freq(yarn);
  ASSERT_EQ(table.size(), 3u * 128);
  for (size_t p = 0; p < 3; ++p)
    for (size_t j = 0; j < 64; ++j) {
      EXPECT_FLOAT_EQ(table[p * 128 + j], static_cast<float>(a * std::cos(p * inv[j])));
      EXPECT_FLOAT_EQ(table[p * 128 + 64 + j], static_cast<float>(a * std::sin(p * inv[j])));
    }
  // attention_factor in the config replaces it (transformers).
  const ModelConfig given =
      config_with(R"({"type": "yarn", "factor": 4.0, "attention_factor": 1.5})");
  EXPECT_DOUBLE_EQ(rope_attention_factor(given), 1.5);
  EXPECT_FLOAT_EQ(rope_cos_sin_table(given, 1)[0], 1.5f);
  // Other scalings leave the table unscaled.
  EXPECT_DOUBLE_EQ(rope_attention_factor(config_with(R"({"type": "linear", "factor": 4.0})")), 1.0);
}

TEST(ModelRope, FrequenciesAndAttentionFactorEqualTransformers) {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/rope_reference.json");
  if (!in) throw std::runtime_error("tests/data/rope_reference.json missing");
  const nlohmann::json ref = nlohmann::json::parse(in);
  ASSERT_GE(ref.at("cases").size(), 5u);
  for (const nlohmann::json& c : ref.at("cases")) {
    SCOPED_TRACE(c.at("rope_scaling").dump());
    const ModelConfig cfg =
        config_with(c.at("rope_scaling").dump(), c.at("max_position_embeddings").get<int64_t>());
    const std::vector<double> inv = rope_inv_freq(cfg);
    const std::vector<double> want = c.at("inv_freq").get<std::vector<double>>();
    ASSERT_EQ(inv.size(), want.size());
    // transformers computes in float32: agreement to its rounding.
    for (size_t j = 0; j < inv.size(); ++j) EXPECT_NEAR(inv[j], want[j], 2e-7 * want[j]) << j;
    EXPECT_NEAR(rope_attention_factor(cfg), c.at("attention_factor").get<double>(), 1e-12);
  }
}

TEST(ModelRope, DerivedMaxModelLenFollowsVllm) {
  EXPECT_EQ(derived_max_model_len(config_with("null")), 32768);
  EXPECT_EQ(derived_max_model_len(config_with(R"({"type": "linear", "factor": 2.0})")), 65536);
  EXPECT_EQ(
      derived_max_model_len(config_with(
          R"({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})", 131072)),
      131072);
  EXPECT_EQ(derived_max_model_len(config_with(R"({"type": "yarn", "factor": 4.0})")), 131072);
  EXPECT_EQ(derived_max_model_len(config_with(
                R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})",
                131072)),
            131072);
}

}  // namespace
}  // namespace pagoda
