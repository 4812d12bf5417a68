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
  if (tileable(p.bits, p.out_features,
               p.in_features)) {  // every code where the fragment map puts it
    const std::vector<uint32_t> t = tile_int4(p);
    ASSERT_EQ(t.size(), p.qweight.size());
    const int64_t words = p.words_per_row();
    for (int64_t n = 0; n < p.out_features; ++n)
      for (int64_t j = 0; j < p.in_features; ++j)
        ASSERT_EQ(tiled_code(t, p.in_features, n, j),
                  (p.qweight[static_cast<size_t>(n * words + j / 8)] >> (4 * (j % 8))) & 15u)
            << w.module << " row " << n << " position " << j;
  }
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

// The fragment map itself, against the PTX ISA's m16n8k16 A layout: lane
// t's register p holds (row t/4 + 8·(p%2), column 2·(t%4) + 8·(p/2) + h)
// in its half h.
TEST(PackedLinear, TiledLayoutFollowsTheMmaFragment) {
  PackedLinear p;
  p.bits = 4;
  p.out_features = 16;
  p.in_features = 64;
  p.num_groups = 1;
  p.qweight.assign(16 * 8, 0u);
  // Code of (n, j): a function of both, 4 bits.
  auto code = [](int64_t n, int64_t j) { return static_cast<uint32_t>((n * 7 + j * 3) % 16); };
  for (int64_t n = 0; n < 16; ++n)
    for (int64_t j = 0; j < 64; ++j)
      p.qweight[static_cast<size_t>(n * 8 + j / 8)] |= code(n, j) << (4 * (j % 8));
  const std::vector<uint32_t> t = tile_int4(p);
  for (int kt = 0; kt < 4; ++kt)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 4; ++reg)
        for (int h = 0; h < 2; ++h) {
          const uint32_t word =
              t[static_cast<size_t>(lane * 4 + kt)];  // row tile 0, position tiles 0..3
          const uint32_t got = (word >> (4 * (reg + 4 * h))) & 15u;
          // Fragment row and column (PTX ISA, mma.m16n8k16 A), and the
          // position packed_linear.h puts at that column: lane quad q holds
          // positions 8q .. 8q + 7 of the tile's 32-position chunk, 4 per tile.
          const int64_t row = lane / 4 + 8 * (reg % 2), col = 2 * (lane % 4) + 8 * (reg / 2) + h;
          const int64_t pos =
              (kt / 2) * 32 + 8 * (col % 8 / 2) + 4 * (kt % 2) + 2 * (col / 8) + col % 2;
          EXPECT_EQ(got, code(row, pos)) << "lane " << lane << " reg " << reg << " half " << h;
        }
  EXPECT_FALSE(tileable(8, 16, 64));
  EXPECT_FALSE(tileable(4, 24, 64));
  EXPECT_FALSE(tileable(4, 16, 96));
}

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
