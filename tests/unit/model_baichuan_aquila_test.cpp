// Aquila (AquilaForCausalLM / AquilaModel: the Llama layout) and Baichuan
// (BaiChuanForCausalLM: Baichuan-7B, rotary; BaichuanForCausalLM:
// Baichuan2-7B rotary at hidden_size 4096, else Baichuan-13B / Baichuan2-13B
// with ALiBi; W_pack fused q/k/v; Baichuan2's NormHead at vocab 125696), as
// vLLM's baichuan.py and its Aquila-to-Llama mapping read them.
//  * References no one here wrote: tiny-random-llama rewritten into the
//    Aquila and Baichuan-7B layouts at test time (tests/unit/
//    llama_relayout.h) is the same function as the Llama model, so its HF
//    transformers reference applies: every logit row within 1e-4 relative
//    L2 (tests/unit/model_golden_test.cpp's bound for this model) and its
//    greedy ids decoded one token per step.
//  * ALiBi Baichuan (no HF reference here): the forward against a direct
//    float64 evaluation of Baichuan-13B's equations written in this file
//    (prefill and one-token decode steps through the paged cache), the
//    slopes against Baichuan's / BLOOM's closed form, TP=2 against TP=1
//    (each rank its heads' slopes).
//  * NormHead: the loaded lm_head rows read back through a probe model
//    have unit L2 norm, and (an algebraic identity) a Baichuan2-vocabulary
//    model gives the logits of the same model with NormHead switched off
//    and its lm_head normalised beforehand by this test.
//  * Bad input: a W_pack of the wrong shape, a GQA config, a Llama-layout
//    checkpoint labelled Baichuan: errors naming the tensor / field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/model/rope.h"
#include "tests/unit/checkpoint_rewrite.h"
#include "tests/unit/llama_relayout.h"
#include "tests/unit/model_test_helpers.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

json tiny_llama_reference() {
  std::ifstream in(tiny_llama_dir() + "/reference.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);
}

// tiny-random-llama's HF reference on the model in `dir`: every sequence's
// last-position logits (and all 33 positions of the sequence that has
// them) within 1e-4 relative L2, and the greedy ids of the sequences of up
// to 200 tokens decoded one token per step through the paged cache.
void check_tiny_llama_reference(const std::string& dir, const std::string& tag) {
  const json ref = tiny_llama_reference();
  CpuModel m(dir, 80, 1024);
  const auto V = static_cast<size_t>(m.config.vocab_size);
  double worst = 0;
  int rows = 0, greedy_seqs = 0;
  for (const json& seq : ref["sequences"]) {
    auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    const auto n = static_cast<int32_t>(ids.size());
    const bool all = seq.contains("all_logits");
    std::vector<int32_t> want_rows;
    if (all)
      for (int32_t i = 0; i < n; ++i) want_rows.push_back(i);
    const auto greedy = seq["greedy_ids"].get<std::vector<int32_t>>();
    const bool decode = ids.size() <= 200;
    const auto blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, blocks, want_rows));
    for (int32_t i = all ? 0 : n - 1; i < n; ++i) {
      const auto want = (all ? seq["all_logits"][static_cast<size_t>(i)] : seq["last_logits"])
                            .get<std::vector<double>>();
      ASSERT_EQ(want.size(), V);
      const double e = rel_l2(logits.data(), want, all ? static_cast<size_t>(i) * V : 0);
      EXPECT_LT(e, 1e-4) << tag << " n=" << n << " position " << i;
      worst = std::max(worst, e);
      ++rows;
    }
    if (!decode) continue;
    if (all) logits.erase(logits.begin(), logits.begin() + static_cast<long>((n - 1) * V));
    std::vector<int32_t> got;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const int32_t next = argmax_row(logits, 0, static_cast<int64_t>(V));
      got.push_back(next);
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(one_seq_batch({next}, pos, 0, blocks));
    }
    EXPECT_EQ(got, greedy) << tag << " prompt of " << n << " tokens";
    ++greedy_seqs;
  }
  EXPECT_EQ(rows, 4 + 33);
  EXPECT_EQ(greedy_seqs, 4);
  std::printf("[%s] %d logit rows, worst relative L2 %.3g; %d greedy continuations equal\n",
              tag.c_str(), rows, worst, greedy_seqs);
}

// ---- Aquila ---------------------------------------------------------------

TEST(ModelAquila, LlamaLayoutMatchesTransformers) {
  for (const char* arch : {"AquilaForCausalLM", "AquilaModel"}) {
    TempModelDir dir("aquila");
    write_aquila_layout(dir, arch);
    const ModelConfig c = ModelConfig::from_dir(dir.str());
    EXPECT_EQ(c.architecture, arch);
    EXPECT_EQ(c.model_type, "aquila");
    EXPECT_EQ(c.family, "llama");
    EXPECT_TRUE(c.fused_qkv.empty());
    EXPECT_FALSE(c.alibi || c.norm_head);
    check_tiny_llama_reference(dir.str(), arch);
  }
}

// ---- Baichuan: config ------------------------------------------------------

// The fields that matter here of the published configs (baichuan-inc's
// Hugging Face repositories): Baichuan-7B gives max_position_embeddings,
// Baichuan2-7B both lengths, the 13B models model_max_length only.
struct PublishedConfig {
  const char* name;
  const char* arch;
  int64_t hidden, heads, vocab;
  bool max_pos, model_max;
  bool want_alibi, want_norm_head;
};
const PublishedConfig kPublished[] = {
    {"Baichuan-7B", "BaiChuanForCausalLM", 4096, 32, 64000, true, false, false, false},
    {"Baichuan-13B-Base", "BaichuanForCausalLM", 5120, 40, 64000, false, true, true, false},
    {"Baichuan2-7B-Base", "BaichuanForCausalLM", 4096, 32, 125696, true, true, false, true},
    {"Baichuan2-13B-Base", "BaichuanForCausalLM", 5120, 40, 125696, false, true, true, true},
};

json published_config(const PublishedConfig& p) {
  json c = {{"architectures", {p.arch}},
            {"model_type", "baichuan"},
            {"hidden_act", "silu"},
            {"hidden_size", p.hidden},
            {"intermediate_size", p.hidden == 4096 ? 11008 : 13696},
            {"num_attention_heads", p.heads},
            {"num_hidden_layers", p.heads},
            {"rms_norm_eps", 1e-6},
            {"tie_word_embeddings", false},
            {"vocab_size", p.vocab}};
  if (p.max_pos) c["max_position_embeddings"] = 4096;
  if (p.model_max) c["model_max_length"] = 4096;
  return c;
}

// vLLM's rule: BaiChuanForCausalLM rotary; BaichuanForCausalLM rotary at
// hidden_size 4096 (Baichuan2-7B), ALiBi otherwise; NormHead at vocabulary
// 125696; the context from max_position_embeddings / model_max_length.
TEST(ModelBaichuan, PublishedConfigsPickRotaryOrAlibiAsVllm) {
  for (const PublishedConfig& p : kPublished) {
    SCOPED_TRACE(p.name);
    const ModelConfig c = ModelConfig::from_json_text(published_config(p).dump(), p.name);
    EXPECT_EQ(c.architecture, p.arch);
    EXPECT_EQ(c.family, "llama");
    EXPECT_EQ(c.fused_qkv, "W_pack");
    EXPECT_FALSE(c.fused_gate_up);
    EXPECT_EQ(c.num_key_value_heads, p.heads);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.alibi, p.want_alibi);
    EXPECT_EQ(c.rotary_dims(), p.want_alibi ? 0 : 128);
    EXPECT_EQ(c.norm_head, p.want_norm_head);
    EXPECT_EQ(c.max_position_embeddings, 4096);
    EXPECT_EQ(derived_max_model_len(c), 4096);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  }
  // The hidden size alone decides for BaichuanForCausalLM: 4096 and one
  // either side of it.
  for (int64_t hidden : {4032, 4096, 4160}) {
    json j = published_config(kPublished[1]);
    j["hidden_size"] = hidden;
    j["num_attention_heads"] = hidden / 64;
    const ModelConfig c = ModelConfig::from_json_text(j.dump(), "hidden " + std::to_string(hidden));
    EXPECT_EQ(c.alibi, hidden != 4096) << hidden;
    EXPECT_EQ(c.rotary_dims(), hidden != 4096 ? 0 : 64) << hidden;
  }
  // BaiChuanForCausalLM (Baichuan-7B's class) is rotary at any hidden size.
  json j = published_config(kPublished[0]);
  j["hidden_size"] = 5120;
  j["num_attention_heads"] = 40;
  EXPECT_FALSE(ModelConfig::from_json_text(j.dump(), "7B class at 5120").alibi);
  // The smaller of the two lengths; 2048 (vLLM's default) when neither.
  j = published_config(kPublished[2]);
  j["model_max_length"] = 2048;
  EXPECT_EQ(ModelConfig::from_json_text(j.dump(), "lengths").max_position_embeddings, 2048);
  j.erase("model_max_length");
  j.erase("max_position_embeddings");
  EXPECT_EQ(ModelConfig::from_json_text(j.dump(), "no length").max_position_embeddings, 2048);
  // Without "architectures", model_type baichuan reads as BaichuanForCausalLM
  // (whose hidden-size rule also covers Baichuan-7B).
  j = published_config(kPublished[3]);
  j.erase("architectures");
  EXPECT_EQ(ModelConfig::from_json_text(j.dump(), "no arch").architecture, "BaichuanForCausalLM");
}

// ALiBi's slopes (rope.h's alibi_slopes, the one function BLOOM's and
// Baichuan's attention use) against the closed form of Baichuan-13B's
// _get_interleave and BLOOM's build_alibi_tensor: for m = the largest power
// of two <= n, 2^(-8k/m) for k = 1..m, then 2^(-4(2j-1)/m) for j = 1..n-m.
TEST(ModelBaichuan, AlibiSlopesAreBaichuansInterleave) {
  for (int64_t n : {1, 4, 6, 8, 12, 32, 40, 64}) {
    int64_t m = 1;
    while (2 * m <= n) m *= 2;
    const std::vector<float> got = alibi_slopes(n);
    ASSERT_EQ(static_cast<int64_t>(got.size()), n);
    for (int64_t h = 0; h < n; ++h) {
      const double want =
          h < m ? std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(m))
                : std::exp2(-4.0 * static_cast<double>(2 * (h - m) + 1) / static_cast<double>(m));
      EXPECT_NEAR(got[static_cast<size_t>(h)], want, 1e-7 * want) << n << " heads, head " << h;
    }
  }
  // Baichuan-13B's 40 heads: 2^(-k/4) for k = 1..32, then 2^(-1/8), 2^(-3/8), ...
  const std::vector<float> s = alibi_slopes(40);
  EXPECT_NEAR(s[0], std::exp2(-0.25), 1e-7);
  EXPECT_NEAR(s[31], std::exp2(-8.0), 1e-9);
  EXPECT_NEAR(s[32], std::exp2(-0.125), 1e-7);
  EXPECT_NEAR(s[39], std::exp2(-15.0 / 8), 1e-7);
}

// ---- Baichuan-7B: W_pack against the Llama reference -----------------------

TEST(ModelBaichuan, BaiChuan7BWPackMatchesTransformers) {
  TempModelDir dir("baichuan7b");
  write_baichuan_layout(dir, "BaiChuanForCausalLM", "max_position_embeddings");
  // The rewritten checkpoint holds W_pack and no separate q/k/v.
  const RawCheckpoint ck = read_safetensors(dir.str() + "/model.safetensors");
  ASSERT_EQ(ck.at("model.layers.0.self_attn.W_pack.weight").shape,
            (std::vector<int64_t>{384, 128}));
  ASSERT_EQ(ck.count("model.layers.0.self_attn.q_proj.weight"), 0u);
  const ModelConfig c = ModelConfig::from_dir(dir.str());
  EXPECT_EQ(c.fused_qkv, "W_pack");
  EXPECT_FALSE(c.alibi || c.norm_head);
  EXPECT_EQ(c.rotary_dims(), 32);
  check_tiny_llama_reference(dir.str(), "BaiChuanForCausalLM");
}

// The same weights as BaichuanForCausalLM with hidden_size 128 (not 4096):
// the ALiBi model, which is a different function from the rotary one.
TEST(ModelBaichuan, BaichuanForCausalLMAtHidden128IsAlibiNotRotary) {
  TempModelDir rot("baichuan_rot"), ali("baichuan_alibi");
  write_baichuan_layout(rot, "BaiChuanForCausalLM", "max_position_embeddings");
  write_baichuan_layout(ali, "BaichuanForCausalLM", "model_max_length");
  const ModelConfig c = ModelConfig::from_dir(ali.str());
  ASSERT_TRUE(c.alibi);
  EXPECT_EQ(c.rotary_dims(), 0);
  EXPECT_EQ(c.max_position_embeddings, 2048);  // from model_max_length
  CpuModel a(rot.str(), 8, 64), b(ali.str(), 8, 64);
  const std::vector<int32_t> ids = {1, 17, 300, 42, 99, 5, 7, 250, 11, 480};
  const std::vector<float> la = a.run(one_seq_batch(ids, 0, 0, 1));
  const std::vector<float> lb = b.run(one_seq_batch(ids, 0, 0, 1));
  const std::vector<double> ref(la.begin(), la.end());
  EXPECT_GT(rel_l2(lb.data(), ref), 1e-2);
}

// ---- Baichuan-13B: ALiBi against a direct float64 evaluation ----------------

// Baichuan-13B's forward (modeling_baichuan.py of Baichuan-13B-Base:
// BaichuanModel with ALiBi) evaluated directly in float64 on the weights of
// `ck` (Baichuan layout): per layer x += o(attn(rmsnorm(x))), x +=
// down(silu(gate(h)) * up(h)) with h = rmsnorm(x); attention scores q·k /
// sqrt(D) + slope_h * j over keys j <= i, slope_h = 2^(-8(h+1)/Hq) (Hq a
// power of two); then rmsnorm and lm_head. Returns [T, V] logits.
std::vector<double> direct_alibi_forward(const RawCheckpoint& ck, const json& cfg,
                                         const std::vector<int32_t>& ids) {
  const auto H = cfg["hidden_size"].get<int64_t>(), I = cfg["intermediate_size"].get<int64_t>();
  const auto Hq = cfg["num_attention_heads"].get<int64_t>(), V = cfg["vocab_size"].get<int64_t>();
  const auto layers = cfg["num_hidden_layers"].get<int64_t>();
  const double eps = cfg["rms_norm_eps"].get<double>();
  const int64_t D = H / Hq, T = static_cast<int64_t>(ids.size());
  auto w = [&](const std::string& n) {
    const std::vector<float> f = ck.at(n).floats();
    return std::vector<double>(f.begin(), f.end());
  };
  // y[t, n] = sum_k x[t, k] W[n, k]
  auto linear = [&](const std::vector<double>& x, const std::vector<double>& W, int64_t n,
                    int64_t k) {
    std::vector<double> y(static_cast<size_t>(T * n), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < n; ++o) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i)
          s += x[static_cast<size_t>(t * k + i)] * W[static_cast<size_t>(o * k + i)];
        y[static_cast<size_t>(t * n + o)] = s;
      }
    return y;
  };
  auto rmsnorm = [&](const std::vector<double>& x, const std::vector<double>& g) {
    std::vector<double> y(x.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < H; ++i)
        ss += x[static_cast<size_t>(t * H + i)] * x[static_cast<size_t>(t * H + i)];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(H) + eps);
      for (int64_t i = 0; i < H; ++i)
        y[static_cast<size_t>(t * H + i)] =
            x[static_cast<size_t>(t * H + i)] * r * g[static_cast<size_t>(i)];
    }
    return y;
  };
  const std::vector<double> emb = w("model.embed_tokens.weight");
  std::vector<double> x(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i)
      x[static_cast<size_t>(t * H + i)] =
          emb[static_cast<size_t>(ids[static_cast<size_t>(t)] * H + i)];
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::vector<double> h = rmsnorm(x, w(p + "input_layernorm.weight"));
    const std::vector<double> qkv = linear(h, w(p + "self_attn.W_pack.weight"), 3 * H, H);
    std::vector<double> att(static_cast<size_t>(T * H), 0.0);
    for (int64_t hd = 0; hd < Hq; ++hd) {
      const double slope = std::exp2(-8.0 * static_cast<double>(hd + 1) / static_cast<double>(Hq));
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(static_cast<size_t>(i + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += qkv[static_cast<size_t>(i * 3 * H + hd * D + d)] *
                   qkv[static_cast<size_t>(j * 3 * H + H + hd * D + d)];
          s[static_cast<size_t>(j)] =
              dot / std::sqrt(static_cast<double>(D)) + slope * static_cast<double>(j);
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < D; ++d)
            att[static_cast<size_t>(i * H + hd * D + d)] +=
                s[static_cast<size_t>(j)] / z *
                qkv[static_cast<size_t>(j * 3 * H + 2 * H + hd * D + d)];
      }
    }
    const std::vector<double> o = linear(att, w(p + "self_attn.o_proj.weight"), H, H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const std::vector<double> h2 = rmsnorm(x, w(p + "post_attention_layernorm.weight"));
    const std::vector<double> g = linear(h2, w(p + "mlp.gate_proj.weight"), I, H);
    std::vector<double> u = linear(h2, w(p + "mlp.up_proj.weight"), I, H);
    for (size_t i = 0; i < u.size(); ++i) u[i] *= g[i] / (1.0 + std::exp(-g[i]));
    const std::vector<double> dn = linear(u, w(p + "mlp.down_proj.weight"), H, I);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  return linear(rmsnorm(x, w("model.norm.weight")), w("lm_head.weight"), V, H);
}

// Every position of a 40-token prompt (prefill), then the same prompt as a
// 20-token prefill followed by 20 one-token decode steps through the paged
// cache (the decode attention path, keys read back from the cache): each
// logit row within 1e-5 relative L2 of the float64 evaluation.
TEST(ModelBaichuan, Baichuan13BAlibiMatchesDirectEvaluation) {
  TempModelDir dir("baichuan13b");
  write_baichuan_layout(dir, "BaichuanForCausalLM", "model_max_length");
  const json cfg = baichuan_config("BaichuanForCausalLM", "model_max_length");
  const RawCheckpoint ck = read_safetensors(dir.str() + "/model.safetensors");
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 97 + 13) % 512);
  const std::vector<double> want = direct_alibi_forward(ck, cfg, ids);
  const size_t V = 512;
  CpuModel m(dir.str(), 8, 64);
  std::vector<int32_t> rows(40);
  for (int32_t i = 0; i < 40; ++i) rows[static_cast<size_t>(i)] = i;
  const std::vector<float> got = m.run(one_seq_batch(ids, 0, 0, 3, rows));
  double worst = 0;
  for (size_t p = 0; p < 40; ++p) {
    const std::vector<double> row(want.begin() + static_cast<long>(p * V),
                                  want.begin() + static_cast<long>((p + 1) * V));
    const double e = rel_l2(got.data(), row, p * V);
    EXPECT_LT(e, 1e-5) << "prefill position " << p;
    worst = std::max(worst, e);
  }
  // Prefill of 20 in blocks 4.., then decodes.
  const std::vector<int32_t> head(ids.begin(), ids.begin() + 20);
  std::vector<float> step = m.run(one_seq_batch(head, 0, 4, 3));
  for (size_t p = 19; p < 40; ++p) {
    if (p > 19) step = m.run(one_seq_batch({ids[p]}, static_cast<int32_t>(p), 4, 3));
    const std::vector<double> row(want.begin() + static_cast<long>(p * V),
                                  want.begin() + static_cast<long>((p + 1) * V));
    const double e = rel_l2(step.data(), row);
    EXPECT_LT(e, 1e-5) << "decode position " << p;
    worst = std::max(worst, e);
  }
  std::printf("[alibi baichuan] worst relative L2 against float64: %.3g\n", worst);
  // The slopes matter: the same model with ALiBi switched off (then it has
  // no position information at all) misses the evaluation by far.
  ModelConfig no_alibi = ModelConfig::from_dir(dir.str());
  no_alibi.alibi = false;
  CpuModel n(dir.str(), no_alibi, 8, 64);
  const std::vector<float> plain = n.run(one_seq_batch(ids, 0, 0, 3));
  const std::vector<double> last(want.end() - static_cast<long>(V), want.end());
  EXPECT_GT(rel_l2(plain.data(), last), 1e-3);
}

// Tensor parallelism: TP=2 (each rank 2 of the 4 heads and those heads'
// slopes) gives TP=1's logits over a prefill, a mixed batch and decodes.
TEST(ModelBaichuan, Baichuan13BAlibiTensorParallelEqualsTp1) {
  TempModelDir dir("baichuan13b_tp");
  write_baichuan_layout(dir, "BaichuanForCausalLM", "model_max_length");
  auto one = cpu_executor(dir.str(), 1), two = cpu_executor(dir.str(), 2);
  const int64_t V = one->vocab_size();
  std::vector<int32_t> a = {1};
  for (int32_t i = 0; i < 30; ++i) a.push_back((i * 37 + 11) % 512);
  std::vector<float> l1, l2;
  one->execute(one_seq_batch(a, 0, 0, 4), l1);
  two->execute(one_seq_batch(a, 0, 0, 4), l2);
  EXPECT_LT(max_rel_diff(l2, l1), 1e-5) << "prefill";
  for (int step = 0; step < 8; ++step) {
    const int32_t next = argmax_row(l1, 0, V);
    const auto pos = static_cast<int32_t>(a.size());
    a.push_back(next);
    one->execute(one_seq_batch({next}, pos, 0, 4), l1);
    two->execute(one_seq_batch({next}, pos, 0, 4), l2);
    EXPECT_LT(max_rel_diff(l2, l1), 1e-5) << "decode step " << step;
  }
}

// ---- Baichuan2's NormHead ---------------------------------------------------

constexpr int64_t kBaichuan2Vocab = 125696;

// A small random model with Baichuan2's vocabulary (125696) in the
// Baichuan layout: hidden 16, 2 heads, 1 layer, fp32 weights from `seed`;
// lm_head rows of varied norms. zero_layer: every attention and MLP weight
// zero, norms one, embedding row i (i < 16) the unit vector e_i, so the
// final hidden state of token i is sqrt(16) e_i (up to eps 1e-12) and its
// logits are 4 x column i of the loaded lm_head (a probe of the weights).
RawCheckpoint baichuan2_random(uint64_t seed, bool zero_layer, json& cfg) {
  const int64_t H = 16, I = 32, V = kBaichuan2Vocab;
  cfg = {{"architectures", {"BaichuanForCausalLM"}},
         {"model_type", "baichuan"},
         {"hidden_act", "silu"},
         {"hidden_size", H},
         {"intermediate_size", I},
         {"num_attention_heads", 2},
         {"num_hidden_layers", 1},
         {"rms_norm_eps", zero_layer ? 1e-12 : 1e-6},
         {"model_max_length", 4096},
         {"tie_word_embeddings", false},
         {"torch_dtype", "float32"},
         {"vocab_size", V}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto random = [&](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = scale * nd(rng);
    return v;
  };
  auto fill = [&](int64_t n, float value) {
    return std::vector<float>(static_cast<size_t>(n), value);
  };
  RawCheckpoint ck;
  std::vector<float> emb = random(V * H, 0.5f);
  if (zero_layer)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t k = 0; k < H; ++k) emb[static_cast<size_t>(i * H + k)] = i == k ? 1.0f : 0.0f;
  ck["model.embed_tokens.weight"] = RawTensor::f32({V, H}, emb);
  std::vector<float> head = random(V * H, 0.1f);
  std::uniform_real_distribution<float> scale(0.2f, 5.0f);
  for (int64_t v = 0; v < V; ++v) {
    const float s = scale(rng);
    for (int64_t k = 0; k < H; ++k) head[static_cast<size_t>(v * H + k)] *= s;
  }
  ck["lm_head.weight"] = RawTensor::f32({V, H}, head);
  ck["model.norm.weight"] = RawTensor::f32({H}, zero_layer ? fill(H, 1.0f) : random(H, 0.3f));
  const std::string p = "model.layers.0.";
  const float ws = zero_layer ? 0.0f : 0.3f;
  ck[p + "input_layernorm.weight"] = RawTensor::f32({H}, fill(H, 1.0f));
  ck[p + "post_attention_layernorm.weight"] = RawTensor::f32({H}, fill(H, 1.0f));
  ck[p + "self_attn.W_pack.weight"] = RawTensor::f32({3 * H, H}, random(3 * H * H, ws));
  ck[p + "self_attn.o_proj.weight"] = RawTensor::f32({H, H}, random(H * H, ws));
  ck[p + "mlp.gate_proj.weight"] = RawTensor::f32({I, H}, random(I * H, ws));
  ck[p + "mlp.up_proj.weight"] = RawTensor::f32({I, H}, random(I * H, ws));
  ck[p + "mlp.down_proj.weight"] = RawTensor::f32({H, I}, random(H * I, ws));
  return ck;
}

// Each row divided by its L2 norm, in float64.
std::vector<float> normalized_rows(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c)
      ss += static_cast<double>(w[static_cast<size_t>(r * cols + c)]) *
            w[static_cast<size_t>(r * cols + c)];
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] =
          static_cast<float>(w[static_cast<size_t>(r * cols + c)] / std::sqrt(ss));
  }
  return out;
}

// The loaded lm_head read back through the zero-layer probe: every row has
// unit L2 norm and equals the checkpoint's row over its norm.
TEST(ModelBaichuan, Baichuan2NormHeadRowsHaveUnitNorm) {
  json cfg;
  const RawCheckpoint ck = baichuan2_random(7, true, cfg);
  TempModelDir dir("baichuan2_probe");
  dir.write(cfg, ck);
  const ModelConfig c = ModelConfig::from_dir(dir.str());
  ASSERT_TRUE(c.norm_head);
  CpuModel m(dir.str(), 4, 16);
  const int64_t H = 16, V = kBaichuan2Vocab;
  std::vector<int32_t> ids(static_cast<size_t>(H)), rows(static_cast<size_t>(H));
  for (int32_t i = 0; i < H; ++i) ids[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)] = i;
  const std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, 1, rows));
  // Column i of the loaded lm_head = logits row i / sqrt(H).
  const std::vector<float> want = normalized_rows(ck.at("lm_head.weight").floats(), V, H);
  double worst_norm = 0, worst_value = 0;
  for (int64_t v = 0; v < V; ++v) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) {
      const double got = logits[static_cast<size_t>(i * V + v)] / 4.0;
      ss += got * got;
      worst_value = std::max(worst_value, std::fabs(got - want[static_cast<size_t>(v * H + i)]));
    }
    worst_norm = std::max(worst_norm, std::fabs(std::sqrt(ss) - 1.0));
  }
  std::printf("[norm head] rows: worst | |w| - 1 | %.3g, worst |w - w/|w|| %.3g\n", worst_norm,
              worst_value);
  EXPECT_LT(worst_norm, 1e-5);
  EXPECT_LT(worst_value, 1e-5);
}

// An algebraic identity, not a reference: NormHead at load (model A) gives
// the logits of the model with NormHead off whose lm_head this test
// normalised beforehand (model B); and the normalisation is not a no-op
// (model A's weights with NormHead off give other logits).
TEST(ModelBaichuan, Baichuan2NormHeadEqualsPrenormalisedHead) {
  json cfg;
  RawCheckpoint ck = baichuan2_random(11, false, cfg);
  TempModelDir a("baichuan2_a"), b("baichuan2_b");
  a.write(cfg, ck);
  ck["lm_head.weight"] =
      RawTensor::f32({kBaichuan2Vocab, 16},
                     normalized_rows(ck.at("lm_head.weight").floats(), kBaichuan2Vocab, 16));
  b.write(cfg, ck);
  ModelConfig off_b = ModelConfig::from_dir(b.str()), off_a = ModelConfig::from_dir(a.str());
  ASSERT_TRUE(off_b.norm_head);
  off_b.norm_head = off_a.norm_head = false;
  CpuModel ma(a.str(), 4, 32), mb(b.str(), off_b, 4, 32), raw(a.str(), off_a, 4, 32);
  const std::vector<int32_t> ids = {1, 5000, 125695, 77, 64000, 3, 99999, 12};
  const std::vector<float> la = ma.run(one_seq_batch(ids, 0, 0, 1));
  const std::vector<float> lb = mb.run(one_seq_batch(ids, 0, 0, 1));
  const std::vector<float> lr = raw.run(one_seq_batch(ids, 0, 0, 1));
  const std::vector<double> ref(lb.begin(), lb.end());
  const double e = rel_l2(la.data(), ref);
  std::printf("[norm head] identity: relative L2 %.3g\n", e);
  EXPECT_LT(e, 1e-6);
  EXPECT_GT(rel_l2(lr.data(), ref), 0.1);
}

TEST(ModelBaichuan, Baichuan2NormHeadWithTiedEmbeddingsIsRefused) {
  json j = published_config(kPublished[3]);
  j["tie_word_embeddings"] = true;
  try {
    ModelConfig::from_json_text(j.dump(), "tied");
    ADD_FAILURE() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tie_word_embeddings"), std::string::npos) << e.what();
  }
}

// ---- Bad input --------------------------------------------------------------

TEST(ModelBaichuan, WrongWPackShapeNamesTensorAndExpectedShape) {
  const json l = tiny_llama_config();
  // W_pack of q and k only: [256, 128] where [3 x 128, 128] is expected.
  RawCheckpoint ck = tiny_llama_weights();
  for (int64_t layer = 0; layer < 3; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    ck[p + "W_pack.weight"] =
        concat_rows({&ck.at(p + "q_proj.weight"), &ck.at(p + "k_proj.weight")});
  }
  TempModelDir dir("baichuan_bad");
  dir.write(baichuan_config("BaiChuanForCausalLM", "max_position_embeddings"), ck);
  const std::string e = load_error(dir.str());
  EXPECT_NE(e.find("model.layers.0.self_attn.W_pack.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[256, 128]"), std::string::npos) << e;
  EXPECT_NE(e.find("config expects [384, 128]"), std::string::npos) << e;

  // A Llama-layout checkpoint (q/k/v separate) labelled Baichuan: the
  // missing W_pack is named.
  TempModelDir llama_named("baichuan_llama_names");
  llama_named.write(baichuan_config("BaiChuanForCausalLM", "max_position_embeddings"),
                    tiny_llama_weights());
  const std::string e2 = load_error(llama_named.str());
  EXPECT_NE(e2.find("model.layers.0.self_attn.W_pack.weight"), std::string::npos) << e2;
}

TEST(ModelBaichuan, GroupedQueryConfigIsRefused) {
  json j = published_config(kPublished[0]);
  j["num_key_value_heads"] = 8;
  try {
    ModelConfig::from_json_text(j.dump(), "gqa");
    ADD_FAILURE() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("W_pack"), std::string::npos) << e.what();
  }
  j = published_config(kPublished[1]);  // ALiBi: rope_scaling would be ignored
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_THROW(ModelConfig::from_json_text(j.dump(), "alibi rope"), std::runtime_error);
}

}  // namespace
}  // namespace pagoda::test
