// ModelConfig / GenerationConfig parsing against the shared config.json files
// (real model shapes) and malformed inputs.
#include "engine/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/model/generation_config.h"
#include "engine/model/llama.h"
#include "engine/model/rope.h"

namespace pagoda {
namespace {

std::string models() { return std::string(PAGODA_SHARED_DIR) + "/models/"; }

std::string error_of(const std::string& text, const std::string& source = "test/config.json") {
  try {
    ModelConfig::from_json_text(text, source);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, Stories260K) {
  const ModelConfig c = ModelConfig::from_dir(models() + "stories260K");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.torch_dtype, DType::F32);
  EXPECT_EQ(c.rope_scaling.rope_type, "");
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
}

TEST(ModelConfig, TinyRandomLlamaDefaultsHeadDim) {
  const ModelConfig c = ModelConfig::from_dir(models() + "tiny-random-llama");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 32);  // hidden / heads (no head_dim in the file)
  EXPECT_EQ(c.torch_dtype, DType::BF16);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ModelConfig, TinyRandomQwen2HasBiasAndTheta) {
  const ModelConfig c = ModelConfig::from_dir(models() + "tiny-random-qwen2");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.attention_bias);  // Qwen2 always has q/k/v bias
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
}

TEST(ModelConfig, EveryPresetParses) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(models() + "presets")) {
    const ModelConfig c = ModelConfig::from_dir(e.path().string());
    EXPECT_GT(c.num_hidden_layers, 0) << e.path();
    EXPECT_EQ(c.hidden_size % c.num_attention_heads, 0) << e.path();
    EXPECT_EQ(c.head_dim * c.num_attention_heads, c.hidden_size) << e.path();
    ++n;
  }
  // The five float presets, and those shared/ adds later (the GPTQ shapes).
  EXPECT_GE(n, 5);
  const ModelConfig l3 = ModelConfig::from_dir(models() + "presets/llama-3.1-8b");
  EXPECT_EQ(l3.num_key_value_heads, 8);
  EXPECT_EQ(l3.head_dim, 128);
  EXPECT_EQ(l3.vocab_size, 128256);
  EXPECT_EQ(l3.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(l3.rope_theta, 500000.0);
  EXPECT_EQ(l3.rope_scaling.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(l3.rope_scaling.factor, 8.0);
  EXPECT_EQ(l3.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(l3.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  const ModelConfig q = ModelConfig::from_dir(models() + "presets/qwen2-7b-instruct");
  EXPECT_EQ(q.hidden_size, 3584);
  EXPECT_EQ(q.num_attention_heads, 28);
  EXPECT_EQ(q.num_key_value_heads, 4);
  EXPECT_EQ(q.intermediate_size, 18944);
  EXPECT_TRUE(q.attention_bias);
  const ModelConfig a = ModelConfig::from_dir(models() + "presets/chinese-alpaca-2-7b");
  EXPECT_EQ(a.vocab_size, 55296);
  EXPECT_EQ(a.torch_dtype, DType::F16);
  const ModelConfig l13 = ModelConfig::from_dir(models() + "presets/llama-2-13b");
  EXPECT_EQ(l13.hidden_size, 5120);
  EXPECT_EQ(l13.num_hidden_layers, 40);
}

// Dynamic NTK as vLLM tabulates it (one table of max_position_embeddings *
// factor positions, base * (factor^2 - factor + 1)^(d / (d - 2))): head_dim
// 8, theta 10000, factor 4. Expected values computed separately in Python
// from vLLM's DynamicNTKScalingRotaryEmbedding formula.
TEST(ModelConfig, DynamicNtkRopeFrequenciesAndContextAsVllm) {
  const ModelConfig c = ModelConfig::from_json_text(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 100,
          "max_position_embeddings": 2048, "rope_theta": 10000,
          "rope_scaling": {"type": "dynamic", "factor": 4}})",
      "test/config.json");
  EXPECT_EQ(c.rope_scaling.rope_type, "dynamic");
  const std::vector<double> inv = rope_inv_freq(c);
  const double want[4] = {1.0, 0.042529037028299015, 0.001808718990554429, 7.692307692307694e-05};
  ASSERT_EQ(inv.size(), 4u);
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(inv[j], want[j], 1e-12 * want[j]) << j;
  EXPECT_EQ(derived_max_model_len(c), 8192);
}

TEST(ModelConfig, Llama3RopeScalingFrequencies) {
  const ModelConfig c = ModelConfig::from_dir(models() + "presets/llama-3.1-8b");
  const std::vector<double> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  // High frequencies (wavelength < 8192 / 4) are kept, low ones
  // (wavelength > 8192 / 1) divided by 8, the band between blended.
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  const double raw63 = std::pow(500000.0, -126.0 / 128.0);
  EXPECT_NEAR(inv[63], raw63 / 8.0, 1e-15);
  int kept = 0, divided = 0, blended = 0;
  for (size_t j = 0; j < inv.size(); ++j) {
    const double raw = std::pow(500000.0, -2.0 * static_cast<double>(j) / 128.0);
    const double wl = 2 * M_PI / raw;
    if (wl < 2048) {
      EXPECT_DOUBLE_EQ(inv[j], raw);
      ++kept;
    } else if (wl > 8192) {
      EXPECT_DOUBLE_EQ(inv[j], raw / 8);
      ++divided;
    } else {
      EXPECT_LT(inv[j], raw);
      EXPECT_GT(inv[j], raw / 8);
      const double s = (8192 / wl - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(inv[j], (1 - s) * raw / 8 + s * raw, 1e-15);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(ModelConfig, RejectsUnsupportedArchitectureNamingTheFile) {
  const std::string msg =
      error_of(R"({"architectures": ["OPTForCausalLM"], "hidden_size": 8})", "/m/config.json");
  EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("OPTForCausalLM"), std::string::npos) << msg;
  EXPECT_NE(msg.find("architectures"), std::string::npos) << msg;
}

TEST(ModelConfig, RejectsBadInputWithFieldNames) {
  const std::string base =
      R"("architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 100)";
  EXPECT_EQ(error_of("{" + base + "}"), "");
  EXPECT_EQ(error_of("{" + base + R"(, "rope_scaling": {"type": "dynamic", "factor": 4}})"), "");
  EXPECT_NE(error_of("{" + base + R"(, "rope_scaling": {"type": "dynamic"}})")
                .find("rope_scaling.factor"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "rope_scaling": {"type": "dynamic", "factor": 0.5}})")
                .find("rope_scaling.factor"),
            std::string::npos);
  EXPECT_NE(
      error_of("{" + base + R"(, "rope_scaling": {"type": "dynamic", "factor": 2, "alpha": 1000}})")
          .find("rope_scaling.alpha"),
      std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "rope_scaling": {"type": "longrope", "factor": 4}})")
                .find("rope_scaling"),
            std::string::npos);
  EXPECT_NE(
      error_of("{" + base + R"(, "rope_scaling": {"type": "yarn"}})").find("rope_scaling.factor"),
      std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "rope_scaling": {"type": "yarn", "factor": 1e300}})")
                .find("rope_scaling.factor"),
            std::string::npos);
  EXPECT_NE(
      error_of(
          "{" + base +
          R"(, "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 1e300}})")
          .find("rope_scaling.original_max_position_embeddings"),
      std::string::npos);
  EXPECT_NE(
      error_of(
          "{" + base +
          R"(, "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1, "mscale_all_dim": 1}})")
          .find("rope_scaling.mscale"),
      std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "num_key_value_heads": 3})").find("num_key_value_heads"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "hidden_act": "gelu"})").find("hidden_act"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "eos_token_id": "x"})").find("eos_token_id"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "torch_dtype": "int8"})").find("torch_dtype"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})")
                .find("intermediate_size"),
            std::string::npos);
  EXPECT_NE(error_of("{ not json").find("bad JSON"), std::string::npos);
  EXPECT_NE(
      error_of(
          R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 100, "use_sliding_window": true})")
          .find("use_sliding_window"),
      std::string::npos);
  try {
    ModelConfig::from_dir("/nonexistent/model");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model/config.json"), std::string::npos)
        << e.what();
  }
}

TEST(ModelConfig, LinearRopeAndEosList) {
  const ModelConfig c = ModelConfig::from_json_text(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100, "eos_token_id": [5, 7],
          "rope_scaling": {"type": "linear", "factor": 2.0}})",
      "t");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(c.rope_scaling.rope_type, "linear");
  const std::vector<double> inv = rope_inv_freq(c);
  EXPECT_DOUBLE_EQ(inv[0], 0.5);
  EXPECT_NEAR(inv[1], std::pow(10000.0, -2.0 / 8.0) / 2.0, 1e-15);
  // KV bytes per block: 2 (K,V) * layers * block * Hk * D * dtype.
  EXPECT_EQ(LlamaModel::kv_bytes_per_block(c, 16, DType::BF16), 2u * 2 * 16 * 2 * 8 * 2);
}

TEST(GenerationConfig, ReadsFilesAndDefaults) {
  const GenerationConfig s = GenerationConfig::from_dir(models() + "stories260K");
  EXPECT_EQ(s.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(s.bos_token_id, 1);
  EXPECT_EQ(s.max_length, 512);
  EXPECT_FALSE(s.temperature.has_value());
  const GenerationConfig q = GenerationConfig::from_dir(models() + "tiny-random-qwen2-chat");
  EXPECT_EQ(q.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  const GenerationConfig none = GenerationConfig::from_dir(models() + "tiny-random-llama");
  EXPECT_TRUE(none.eos_token_ids.empty());

  const auto dir =
      std::filesystem::temp_directory_path() / ("pagoda_gencfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json")
      << R"({"temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1, "eos_token_id": 3})";
  const GenerationConfig g = GenerationConfig::from_dir(dir.string());
  EXPECT_FLOAT_EQ(*g.temperature, 0.6f);
  EXPECT_FLOAT_EQ(*g.top_p, 0.9f);
  EXPECT_EQ(*g.top_k, 20);
  EXPECT_FLOAT_EQ(*g.repetition_penalty, 1.1f);
  EXPECT_EQ(g.eos_token_ids, std::vector<int32_t>{3});
  EXPECT_FALSE(g.min_p.has_value());
  EXPECT_FALSE(g.max_new_tokens.has_value());
  // vLLM's get_diff_sampling_param also reads min_p and max_new_tokens.
  std::ofstream(dir / "generation_config.json") << R"({"min_p": 0.05, "max_new_tokens": 256})";
  const GenerationConfig m = GenerationConfig::from_dir(dir.string());
  EXPECT_FLOAT_EQ(*m.min_p, 0.05f);
  EXPECT_EQ(*m.max_new_tokens, 256);
  for (const char* bad : {R"({"max_new_tokens": 0})", R"({"max_new_tokens": 2.5})",
                          R"({"min_p": "x"})", R"({"min_p": 1.5})"}) {
    std::ofstream(dir / "generation_config.json") << bad;
    EXPECT_THROW(GenerationConfig::from_dir(dir.string()), std::runtime_error) << bad;
  }
  std::ofstream(dir / "generation_config.json") << "{ broken";
  try {
    GenerationConfig::from_dir(dir.string());
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda
