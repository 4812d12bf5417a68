// LlamaModel::load_gpt: the GPT-style families' checkpoints as published
// (HF transformers' modeling_gpt2 / gpt_neox / gptj / falcon / bloom tensor
// names) into the one model definition's fused layout (llama.h): q/k/v rows
// as [q heads, k heads, v heads], an ungated MLP's up projection in
// gate_up_w, LayerNorm weights and biases. Fused q/k/v tensors come in
// three layouts: per head [q, k, v] rows (GPT-NeoX, BLOOM, Falcon without
// multi_query), [q heads, k, v] (Falcon multi_query), and GPT-2's Conv1D
// [in, out] with q, k, v column blocks (read transposed).
#include <stdexcept>
#include <string>

#include "engine/model/llama.h"

namespace pagoda {

void LlamaModel::load_gpt(const FillFn& fill) {
  const ModelConfig& c = config_;
  if (tp_.size > 1)
    throw std::runtime_error(c.architecture +
                             ": tensor parallelism is not supported for this family");
  const DType dt = backend_.act_dtype();
  const int64_t H = c.hidden_size, D = c.head_dim, V = c.vocab_size, I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  const std::string& f = c.family;
  const bool neox = f == "gpt_neox", gpt2 = f == "gpt2", gptj = f == "gptj", falcon = f == "falcon";
  const bool bloom = f == "bloom";
  const Shard whole{};
  auto rows = [](int64_t begin, int64_t n) { return Shard{0, begin, n, false}; };
  // GPT-2's Conv1D weight [in, out]: columns [begin, begin+n) as [n, in].
  auto tcols = [](int64_t begin, int64_t n) { return Shard{1, begin, n, true}; };
  auto alloc_fill = [&](const std::string& name, std::initializer_list<int64_t> shape) {
    Tensor t = backend_.alloc(dt, shape);
    fill(name, std::vector<int64_t>(shape), whole, t);
    return t;
  };
  const std::string top = neox ? "gpt_neox." : "transformer.";
  auto lname = [&](int64_t l, const std::string& rest) {
    return top + (neox ? "layers." : "h.") + std::to_string(l) + "." + rest;
  };

  embed_tokens_ = alloc_fill(top +
                                 (neox           ? "embed_in"
                                  : gpt2 || gptj ? "wte"
                                                 : "word_embeddings") +
                                 ".weight",
                             {V, H});
  const std::string final_norm = top + (neox ? "final_layer_norm" : "ln_f");
  final_norm_ = alloc_fill(final_norm + ".weight", {H});
  final_norm_b_ = alloc_fill(final_norm + ".bias", {H});
  if (bloom) {
    embed_norm_w_ = alloc_fill("transformer.word_embeddings_layernorm.weight", {H});
    embed_norm_b_ = alloc_fill("transformer.word_embeddings_layernorm.bias", {H});
  }
  if (gpt2) wpe_ = alloc_fill("transformer.wpe.weight", {c.max_position_embeddings, H});
  if (c.tie_word_embeddings) {
    lm_head_ = embed_tokens_;
  } else {
    lm_head_ = alloc_fill(neox ? "embed_out.weight" : "lm_head.weight", {V, H});
  }
  if (c.lm_head_bias) lm_head_b_ = alloc_fill("lm_head.bias", {V});

  // Norm names: before attention, and the second (before the MLP) when the
  // layer has one.
  const std::string n1 = gpt2 || gptj ? "ln_1" : "input_layernorm";
  const std::string n2 = gpt2 ? "ln_2" : "post_attention_layernorm";
  const bool second_norm = !c.parallel_residual || c.parallel_two_norms;
  const std::string attn = neox ? "attention." : gpt2 || gptj ? "attn." : "self_attention.";
  const std::string o_name = attn + (gpt2 ? "c_proj" : gptj ? "out_proj" : "dense");
  const std::string up_name = gpt2 ? "mlp.c_fc" : gptj ? "mlp.fc_in" : "mlp.dense_h_to_4h";
  const std::string down_name = gpt2 ? "mlp.c_proj" : gptj ? "mlp.fc_out" : "mlp.dense_4h_to_h";
  const int64_t W = (Hq + 2 * Hk) * D;

  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    L.input_norm = alloc_fill(lname(l, n1 + ".weight"), {H});
    L.input_norm_b = alloc_fill(lname(l, n1 + ".bias"), {H});
    if (second_norm) {
      L.post_attn_norm = alloc_fill(lname(l, n2 + ".weight"), {H});
      L.post_attn_norm_b = alloc_fill(lname(l, n2 + ".bias"), {H});
    }
    // q/k/v into rows [q heads | k heads | v heads] (+ bias alike).
    L.qkv_w = backend_.alloc(dt, {W, H});
    if (c.attention_bias) L.qkv_b = backend_.alloc(dt, {W});
    auto fused = [&](const std::string& suffix, Tensor& dst, bool is_bias) {
      const std::string name = lname(l, attn + (gpt2 ? "c_attn" : "query_key_value") + suffix);
      const std::vector<int64_t> shape = is_bias ? std::vector<int64_t>{W}
                                         : gpt2  ? std::vector<int64_t>{H, W}
                                                 : std::vector<int64_t>{W, H};
      if (gpt2 && !is_bias) {
        fill(name, shape, tcols(0, W), dst);
      } else if (gpt2 || (falcon && Hk != Hq)) {  // [q heads, k heads, v heads] already
        fill(name, shape, whole, dst);
      } else {  // per head [q, k, v] (NeoX, BLOOM, Falcon without multi_query)
        for (int64_t h = 0; h < Hq; ++h)
          for (int64_t part = 0; part < 3; ++part)
            fill(name, shape, rows((3 * h + part) * D, D), dst.slice_rows((part * Hq + h) * D, D));
      }
    };
    if (gptj) {
      fill(lname(l, "attn.q_proj.weight"), {Hq * D, H}, whole, L.qkv_w.slice_rows(0, Hq * D));
      fill(lname(l, "attn.k_proj.weight"), {Hk * D, H}, whole, L.qkv_w.slice_rows(Hq * D, Hk * D));
      fill(lname(l, "attn.v_proj.weight"), {Hk * D, H}, whole,
           L.qkv_w.slice_rows((Hq + Hk) * D, Hk * D));
      if (c.attention_bias) throw std::runtime_error("GPT-J with q/k/v biases is not supported");
    } else {
      fused(".weight", L.qkv_w, false);
      if (c.attention_bias) fused(".bias", L.qkv_b, true);
    }
    L.o_w = backend_.alloc(dt, {H, Hq * D});
    if (gpt2)
      fill(lname(l, o_name + ".weight"), {Hq * D, H}, tcols(0, H), L.o_w);
    else
      fill(lname(l, o_name + ".weight"), {H, Hq * D}, whole, L.o_w);
    if (c.o_bias) L.o_b = alloc_fill(lname(l, o_name + ".bias"), {H});
    L.gate_up_w = backend_.alloc(dt, {I, H});
    L.down_w = backend_.alloc(dt, {H, I});
    if (gpt2) {
      fill(lname(l, up_name + ".weight"), {H, I}, tcols(0, I), L.gate_up_w);
      fill(lname(l, down_name + ".weight"), {I, H}, tcols(0, H), L.down_w);
    } else {
      fill(lname(l, up_name + ".weight"), {I, H}, whole, L.gate_up_w);
      fill(lname(l, down_name + ".weight"), {H, I}, whole, L.down_w);
    }
    if (c.mlp_bias) {
      L.gate_up_b = alloc_fill(lname(l, up_name + ".bias"), {I});
      L.down_b = alloc_fill(lname(l, down_name + ".bias"), {H});
    }
  }
}

}  // namespace pagoda
