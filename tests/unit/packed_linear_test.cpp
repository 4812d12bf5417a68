// PackedLinear (engine/quant/packed_linear.h), the layout the CUDA int4 /
// int8 kernels read: for every quantized linear of the four shared tiny
// checkpoints (GPTQ 4-bit, GPTQ act-order with q/k/v g_idx that differ,
// GPTQ 8-bit per-channel, AWQ with zero points), the packed form
// dequantizes to exactly dequantize_linear's weight (the path tested against
// HF transformers), also for tensor-parallel shards; act-order features are
// sorted by group; layouts that cannot be packed are refused.
#include "engine/quant/packed_linear.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/weights/safetensors.h"

namespace pagoda {
namespace {

std::string dir_of(const std::string& name) {
  return std::string(PAGODA_SHARED_DIR) + "/models/quantized/" + name;
}

QuantConfig config_of(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  return parse_quant_config(nlohmann::json::parse(in)["quantization_config"], dir);
}

void expect_exact(const QuantizedWeight& w) {
  const PackedLinear p = pack_linear(w);
  const size_t n = static_cast<size_t>(w.out_features * w.in_features);
  std::vector<float> want(n), got(n, -1e30f);
  dequantize_linear(w, want.data());
  dequantize_packed(p, got.data());
  ASSERT_EQ(got, want) << w.module;
  EXPECT_EQ(p.qweight.size(), static_cast<size_t>(w.out_features * w.in_features * w.bits / 32));
  EXPECT_EQ(p.chunk_group.size(), static_cast<size_t>(w.in_features / p.chunk()));
  for (size_t j = 1; j < p.perm.size(); ++j) {  // act-order: sorted by group
    EXPECT_LE(w.g_idx[static_cast<size_t>(p.perm[j - 1])], w.g_idx[static_cast<size_t>(p.perm[j])]);
  }
}

void check_model(const std::string& name, bool act_order) {
  const std::string dir = dir_of(name);
  const QuantConfig qc = config_of(dir);
  std::ifstream in(dir + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  const int64_t H = c["hidden_size"], I = c["intermediate_size"];
  const int64_t D = H / c["num_attention_heads"].get<int64_t>();
  const int64_t KV = c["num_key_value_heads"].get<int64_t>() * D;
  SafetensorsModel st(dir);
  int permuted = 0;
  const struct {
    const char* module;
    int64_t n, k;
  } linears[] = {{"self_attn.q_proj", H, H},  {"self_attn.k_proj", KV, H},
                 {"self_attn.v_proj", KV, H}, {"self_attn.o_proj", H, H},
                 {"mlp.gate_proj", I, H},     {"mlp.up_proj", I, H},
                 {"mlp.down_proj", H, I}};
  for (const auto& l : linears) {
    const QuantizedWeight w =
        read_quantized_weight(st, std::string("model.layers.0.") + l.module, qc, l.n, l.k);
    expect_exact(w);
    permuted += pack_linear(w).perm.empty() ? 0 : 1;
    // A column shard (half the outputs) and, where groups allow, a row shard.
    expect_exact(shard_quantized_weight(w, 0, l.n / 2, l.n / 2));
    const int64_t gs = qc.group_size == -1 ? l.k : qc.group_size;
    // (A row shard of an act-order weight splits its groups unevenly: those
    // stay on the dequantized path, see cuda_backend's quantized linears.)
    if (l.k / 2 % gs == 0 && !qc.desc_act)
      expect_exact(shard_quantized_weight(w, 1, l.k / 2, l.k / 2));
  }
  EXPECT_EQ(permuted, act_order ? 7 : 0) << name;
}

TEST(PackedLinear, GptqLlama4Bit) { check_model("tiny-gptq-llama", false); }
TEST(PackedLinear, GptqQwen2ActOrder) { check_model("tiny-gptq-qwen2-actorder", true); }
TEST(PackedLinear, GptqQwen2Int8PerChannel) { check_model("tiny-gptq-qwen2-int8", false); }
TEST(PackedLinear, AwqLlama) { check_model("tiny-awq-llama", false); }

TEST(PackedLinear, RefusesWhatTheKernelsCannotRead) {
  QuantConfig qc;
  qc.method = QuantMethod::GPTQ;
  qc.bits = 4;
  qc.group_size = 128;
  EXPECT_TRUE(packable(qc, 4096));
  EXPECT_FALSE(packable(qc, 4096 + 16));  // not a multiple of 32 features
  qc.group_size = 16;
  EXPECT_FALSE(packable(qc, 4096));  // groups smaller than a 16-byte load
  qc.group_size = -1;
  EXPECT_TRUE(packable(qc, 96));
  qc.bits = 8;
  EXPECT_TRUE(packable(qc, 48));
  qc.bits = 3;
  EXPECT_FALSE(packable(qc, 4096));

  // An act-order group whose features do not fill whole 32-feature chunks.
  QuantizedWeight w;
  w.module = "m";
  w.method = QuantMethod::GPTQ;
  w.bits = 4;
  w.group_size = 32;
  w.desc_act = true;
  w.out_features = 8;
  w.in_features = 64;
  w.num_groups = 2;
  w.qweight.assign(8 * 8, 0);
  w.qzeros.assign(2, 0);
  w.scales.assign(16, 1.f);
  w.g_idx.assign(64, 0);
  for (int k = 0; k < 64; k += 2)
    w.g_idx[static_cast<size_t>(k)] = 1;  // 32 each, interleaved: fine
  EXPECT_NO_THROW(pack_linear(w));
  w.g_idx[1] = 1;  // 33 in group 1, 31 in group 0
  try {
    pack_linear(w);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "quantized linear 'm': a group's input features do not fill whole"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pagoda
