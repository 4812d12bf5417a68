// LlamaModel: weight loading (HF names, fused q/k/v and gate/up) and the
// forward of engine/model/llama.h, written only against Backend ops.
#include "engine/model/llama.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string_view>

#include "engine/cpu/half.h"
#include "engine/model/rope.h"
#include "engine/weights/safetensors.h"

namespace pagoda {
namespace {

// n values of a checkpoint dtype (F32, BF16, F16) as floats.
void host_to_f32(const void* src, DType dt, float* out, int64_t n) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::F32) {
      std::memcpy(&out[i], bytes + 4 * i, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    if (dt == DType::BF16)
      out[i] = cpu::bf16_to_f32(h);
    else if (dt == DType::F16)
      out[i] = cpu::f16_to_f32(h);
    else
      throw std::runtime_error(std::string("weights: unsupported dtype ") + dtype_name(dt) +
                               " for a transposed tensor");
  }
}

// Baichuan2's NormHead (ModelConfig::norm_head): every row of lm_head [V, H]
// divided by its L2 norm (at least 1e-12, torch's F.normalize), in fp32 and
// in chunks of rows. The values come from the checkpoint tensor `src` when
// given (so they are normalised before the cast to the activation dtype),
// else from `head` itself (dummy weights).
void normalize_head_rows(Backend& backend, const Tensor& head, const SafetensorsTensor* src) {
  const int64_t V = head.dim(0), H = head.dim(1);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / H);  // 16 MiB of floats
  std::vector<float> buf;
  for (int64_t b = 0; b < V; b += chunk) {
    const int64_t n = std::min(chunk, V - b);
    buf.resize(static_cast<size_t>(n * H));
    Tensor dst = head.slice_rows(b, n);
    if (src)
      host_to_f32(static_cast<const unsigned char*>(src->data) +
                      static_cast<size_t>(b * H) * dtype_size(src->dtype),
                  src->dtype, buf.data(), n * H);
    else
      backend.copy_to_host(buf.data(), dst);
    for (int64_t r = 0; r < n; ++r) {
      float* row = buf.data() + r * H;
      double ss = 0;
      for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(row[i]) * row[i];
      const double d = std::max(std::sqrt(ss), 1e-12);
      for (int64_t i = 0; i < H; ++i) row[i] = static_cast<float>(row[i] / d);
    }
    backend.copy_from_host(dst, buf.data(), DType::F32);
    backend.synchronize();  // `buf` is reused
  }
}

std::string layer_name(int64_t l, const char* rest) {
  return "model.layers." + std::to_string(l) + "." + rest;
}

// Why a checkpoint tensor the model does not read is left out, as vLLM's
// weight loaders leave it out; nullptr when nothing allows it (an unknown
// tensor: an error, as vLLM's AutoWeightsLoader "There is no module or
// parameter named ...", or its model's KeyError).
const char* skip_reason(std::string_view name, const ModelConfig& c) {
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  // AutoWeightsLoader.ROTARY_EMBEDS_UNUSED_WEIGHTS (ColossalAI / GPTQModel
  // checkpoints keep the rotary buffers).
  for (std::string_view rotary : {"rotary_pos_emb.inv_freq", "rotary_emb.inv_freq",
                                  "rotary_emb.cos_cached", "rotary_emb.sin_cached"})
    if (has(rotary)) return "a rotary embedding buffer";
  // Tied embeddings: the head is the embedding matrix (the models'
  // skip_prefixes=["lm_head."]; GPT-NeoX's head is embed_out).
  if (c.tie_word_embeddings &&
      (name.starts_with("lm_head.") || (c.family == "gpt_neox" && name.starts_with("embed_out."))))
    return "the output head is tied to the input embeddings";
  // HF's causal-mask buffers in GPT-2 / GPT-J / GPT-NeoX checkpoints (their
  // vLLM models skip them by name).
  if ((c.family == "gpt2" || c.family == "gptj") && (has(".attn.bias") || has(".attn.masked_bias")))
    return "an attention mask buffer";
  if (c.family == "gpt_neox" && (has(".attention.bias") || has(".attention.masked_bias")))
    return "an attention mask buffer";
  // The Llama-style models and GPT-J skip a bias they have no parameter
  // for ("Skip loading extra bias for GPTQ models").
  if ((c.family == "llama" || c.family == "gptj") && name.ends_with(".bias"))
    return "a bias the model has no parameter for";
  return nullptr;
}

// After a load that read `used`: every other tensor of the checkpoint is
// skipped (logged at debug, as vLLM's loaders) or, unknown, an error naming
// it and its file.
void check_unused_tensors(const SafetensorsModel& st, const std::set<std::string>& used,
                          const ModelConfig& c) {
  std::vector<std::string> unknown;
  for (const std::string& name : st.names()) {
    if (used.count(name)) continue;
    if (const char* why = skip_reason(name, c)) {
      spdlog::debug("Skipping weight {}: {}", name, why);
      continue;
    }
    unknown.push_back(name);
  }
  if (unknown.empty()) return;
  std::string more;
  if (unknown.size() > 1) {
    more = " (and " + std::to_string(unknown.size() - 1) + " more:";
    for (size_t i = 1; i < unknown.size() && i < 4; ++i) more += " '" + unknown[i] + "'";
    more += unknown.size() > 4 ? " ...)" : ")";
  }
  throw std::runtime_error("weights " + st.find(unknown.front())->file +
                           ": there is no module or parameter named '" + unknown.front() + "' in " +
                           c.architecture + more);
}

}  // namespace

LlamaModel::LlamaModel(const ModelConfig& config, Backend& backend, TensorParallel tp,
                       Communicator* comm)
    : config_(config), backend_(backend), tp_(tp), comm_(comm) {
  validate_tensor_parallel(config_, tp_.size);
  if (tp_.rank < 0 || tp_.rank >= tp_.size)
    throw std::invalid_argument("LlamaModel: tensor-parallel rank " + std::to_string(tp_.rank) +
                                " outside 0.." + std::to_string(tp_.size - 1));
  if (tp_.size > 1 && (!comm_ || comm_->world_size() != tp_.size || comm_->rank() != tp_.rank))
    throw std::invalid_argument("LlamaModel: tensor-parallel size " + std::to_string(tp_.size) +
                                " needs a communicator of that size for rank " +
                                std::to_string(tp_.rank));
  // Ops beyond the Llama set this config needs, refused by name when the
  // backend lacks them (never run with a silently wrong op).
  std::vector<BackendOp> need;
  if (config_.has_sliding_window()) need.push_back(BackendOp::AttentionSlidingWindow);
  if (config_.attn_logit_softcap > 0) need.push_back(BackendOp::AttentionSoftcap);
  if (config_.qk_norm) need.push_back(BackendOp::HeadRmsNorm);
  if (config_.hidden_act == "gelu_pytorch_tanh") need.push_back(BackendOp::GeluTanhMul);
  if (config_.final_logit_softcap > 0) need.push_back(BackendOp::Softcap);
  if (config_.embedding_scale != 1.0) need.push_back(BackendOp::Scale);
  if (config_.num_experts > 0) need.push_back(BackendOp::Moe);
  if (config_.layer_norm) need.push_back(BackendOp::LayerNorm);
  if (!config_.gated_mlp) need.push_back(BackendOp::Activation);
  if (config_.parallel_residual || config_.learned_positions) need.push_back(BackendOp::Add);
  if (config_.rotary_dims() != config_.head_dim) need.push_back(BackendOp::PartialRotary);
  if (config_.rope_interleaved) need.push_back(BackendOp::InterleavedRotary);
  if (config_.alibi) need.push_back(BackendOp::Alibi);
  std::string missing;
  for (BackendOp op : need)
    if (!backend_.implements(op))
      missing += std::string(missing.empty() ? "" : ", ") + backend_op_name(op);
  if (!missing.empty())
    throw std::runtime_error(config_.architecture + " needs ops the " + backend_.name() +
                             " backend does not implement: " + missing);
  if (config_.quantization.enabled() && config_.architecture != "LlamaForCausalLM" &&
      config_.architecture != "Qwen2ForCausalLM")
    throw std::runtime_error(
        "quantized checkpoints are supported for LlamaForCausalLM and "
        "Qwen2ForCausalLM only, not " +
        config_.architecture);
  local_heads_ = config_.num_attention_heads / tp_.size;
  local_kv_heads_ = config_.num_key_value_heads / tp_.size;
  local_intermediate_ = config_.intermediate_size / tp_.size;
}

LlamaModel::~LlamaModel() { free_all(); }

void LlamaModel::free_all() {
  auto f = [&](Tensor& t) {
    if (!t.empty()) backend_.free(t);
  };
  if (lm_head_.data == embed_tokens_.data) lm_head_.data = nullptr;  // tied: one buffer
  f(embed_tokens_);
  f(final_norm_);
  f(lm_head_);
  for (Tensor* t :
       {&final_norm_b_, &lm_head_b_, &embed_norm_w_, &embed_norm_b_, &wpe_, &alibi_slopes_})
    f(*t);
  for (Layer& L : layers_)
    for (Tensor* t : layer_tensors(L)) f(*t);
  layers_.clear();
  backend_.free_host_kv_cache(host_kv_);
  f(rope_.cos_sin);
  for (Tensor* t : {&ws_.hidden, &ws_.residual, &ws_.normed, &ws_.qkv, &ws_.q, &ws_.attn_out,
                    &ws_.gate_up, &ws_.mlp_act, &ws_.mlp_out, &ws_.last_hidden, &ws_.logits})
    f(*t);
  num_kv_blocks_ = 0;
  max_num_tokens_ = max_num_logits_ = 0;
}

std::vector<Tensor*> LlamaModel::layer_tensors(Layer& L) {
  return {&L.input_norm_b,
          &L.post_attn_norm_b,
          &L.o_b,
          &L.gate_up_b,
          &L.down_b,
          &L.input_norm,
          &L.post_attn_norm,
          &L.attn_out_norm,
          &L.mlp_out_norm,
          &L.q_norm,
          &L.k_norm,
          &L.qkv_w,
          &L.qkv_b,
          &L.o_w,
          &L.gate_up_w,
          &L.down_w,
          &L.moe.router,
          &L.moe.gate_up,
          &L.moe.down,
          &L.moe.shared_gate_up,
          &L.moe.shared_down,
          &L.moe.shared_gate,
          &L.kv.k,
          &L.kv.v};
}

void LlamaModel::load_from(const FillFn& fill) {
  const ModelConfig& c = config_;
  const DType dt = backend_.act_dtype();
  const int64_t H = c.hidden_size, D = c.head_dim, V = c.vocab_size;
  const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads, I = c.intermediate_size;
  // This rank's share and where it starts (rank * share).
  const int64_t hq = local_heads_, hk = local_kv_heads_, il = local_intermediate_, r = tp_.rank;
  const Shard whole{};
  auto rows = [](int64_t begin, int64_t n) { return Shard{0, begin, n}; };
  auto cols = [](int64_t begin, int64_t n) { return Shard{1, begin, n}; };
  // A linear of this rank's [n, k], read from `modules` (fused parts):
  // packed when the checkpoint is quantized and the backend keeps it so
  // (Backend::keeps_quantized) — except a row-parallel shard of an
  // act-order weight, whose groups no longer fill whole chunks
  // (packed_linear.h): dequantized at load, as on the CPU.
  const QuantConfig& qc = c.quantization;
  auto alloc_linear = [&](std::initializer_list<const char*> modules, int64_t l, int64_t n,
                          int64_t k, bool row_parallel) {
    bool packed = qc.enabled() && backend_.keeps_quantized(qc, k) &&
                  !(row_parallel && qc.desc_act && tp_.size > 1);
    for (const char* m : modules) packed = packed && !qc.skips(layer_name(l, m));
    return packed ? backend_.alloc_quantized_linear(n, k, qc) : backend_.alloc(dt, {n, k});
  };
  // A norm weight [n]: Gemma's (1 + w) is folded in after the fill.
  auto norm = [&](const std::string& name, int64_t n) {
    Tensor t = backend_.alloc(dt, {n});
    fill(name, {n}, whole, t);
    if (c.norm_one_plus) {
      std::vector<float> w(static_cast<size_t>(n));
      backend_.copy_to_host(w.data(), t);
      for (float& v : w) v += 1.0f;
      backend_.copy_from_host(t, w.data(), DType::F32);
      backend_.synchronize();
    }
    return t;
  };
  free_all();
  if (c.family != "llama") {
    try {
      load_gpt(fill);
    } catch (...) {
      free_all();
      throw;
    }
    return;
  }
  try {
    // Replicated on every rank (vocab-parallel is a later optimisation).
    embed_tokens_ = backend_.alloc(dt, {V, H});
    fill("model.embed_tokens.weight", {V, H}, whole, embed_tokens_);
    final_norm_ = norm("model.norm.weight", H);
    if (c.tie_word_embeddings) {
      lm_head_ = embed_tokens_;
    } else {
      lm_head_ = backend_.alloc(dt, {V, H});
      fill("lm_head.weight", {V, H}, whole, lm_head_);
    }
    layers_.resize(static_cast<size_t>(c.num_hidden_layers));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      Layer& L = layers_[static_cast<size_t>(l)];
      L.input_norm = norm(layer_name(l, "input_layernorm.weight"), H);
      if (c.sandwich_norm) {
        L.attn_out_norm = norm(layer_name(l, "post_attention_layernorm.weight"), H);
        L.post_attn_norm = norm(layer_name(l, "pre_feedforward_layernorm.weight"), H);
        L.mlp_out_norm = norm(layer_name(l, "post_feedforward_layernorm.weight"), H);
      } else {
        L.post_attn_norm = norm(layer_name(l, "post_attention_layernorm.weight"), H);
      }
      if (c.qk_norm) {
        L.q_norm = norm(layer_name(l, "self_attn.q_norm.weight"), D);
        L.k_norm = norm(layer_name(l, "self_attn.k_norm.weight"), D);
      }
      // Column-parallel q/k/v: this rank's heads are contiguous output rows.
      L.qkv_w = alloc_linear({"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, l,
                             (hq + 2 * hk) * D, H, false);
      if (!c.fused_qkv.empty()) {  // Phi-3's qkv_proj, Baichuan's W_pack: rows q, k, v
        const std::string n = layer_name(l, ("self_attn." + c.fused_qkv + ".weight").c_str());
        const std::vector<int64_t> shape{(Hq + 2 * Hk) * D, H};
        fill(n, shape, rows(r * hq * D, hq * D), L.qkv_w.slice_rows(0, hq * D));
        fill(n, shape, rows(Hq * D + r * hk * D, hk * D), L.qkv_w.slice_rows(hq * D, hk * D));
        fill(n, shape, rows((Hq + Hk) * D + r * hk * D, hk * D),
             L.qkv_w.slice_rows((hq + hk) * D, hk * D));
      } else {
        fill(layer_name(l, "self_attn.q_proj.weight"), {Hq * D, H}, rows(r * hq * D, hq * D),
             L.qkv_w.slice_rows(0, hq * D));
        fill(layer_name(l, "self_attn.k_proj.weight"), {Hk * D, H}, rows(r * hk * D, hk * D),
             L.qkv_w.slice_rows(hq * D, hk * D));
        fill(layer_name(l, "self_attn.v_proj.weight"), {Hk * D, H}, rows(r * hk * D, hk * D),
             L.qkv_w.slice_rows((hq + hk) * D, hk * D));
      }
      if (c.attention_bias) {
        if (!c.fused_qkv.empty())
          throw std::runtime_error(c.architecture + ": attention_bias with a fused " + c.fused_qkv +
                                   " is not supported");
        L.qkv_b = backend_.alloc(dt, {(hq + 2 * hk) * D});
        fill(layer_name(l, "self_attn.q_proj.bias"), {Hq * D}, rows(r * hq * D, hq * D),
             L.qkv_b.slice_rows(0, hq * D));
        fill(layer_name(l, "self_attn.k_proj.bias"), {Hk * D}, rows(r * hk * D, hk * D),
             L.qkv_b.slice_rows(hq * D, hk * D));
        fill(layer_name(l, "self_attn.v_proj.bias"), {Hk * D}, rows(r * hk * D, hk * D),
             L.qkv_b.slice_rows((hq + hk) * D, hk * D));
      }
      // Row-parallel o_proj: the input columns of this rank's heads.
      L.o_w = alloc_linear({"self_attn.o_proj"}, l, H, hq * D, true);
      fill(layer_name(l, "self_attn.o_proj.weight"), {H, Hq * D}, cols(r * hq * D, hq * D), L.o_w);
      if (c.num_experts > 0) {
        load_moe(L, l, fill);
        continue;
      }
      L.gate_up_w = alloc_linear({"mlp.gate_proj", "mlp.up_proj"}, l, 2 * il, H, false);
      if (c.fused_gate_up) {  // Phi-3: one [2I, H] tensor, gate rows then up rows
        const std::string n = layer_name(l, "mlp.gate_up_proj.weight");
        fill(n, {2 * I, H}, rows(r * il, il), L.gate_up_w.slice_rows(0, il));
        fill(n, {2 * I, H}, rows(I + r * il, il), L.gate_up_w.slice_rows(il, il));
      } else {
        fill(layer_name(l, "mlp.gate_proj.weight"), {I, H}, rows(r * il, il),
             L.gate_up_w.slice_rows(0, il));
        fill(layer_name(l, "mlp.up_proj.weight"), {I, H}, rows(r * il, il),
             L.gate_up_w.slice_rows(il, il));
      }
      L.down_w = alloc_linear({"mlp.down_proj"}, l, H, il, true);
      fill(layer_name(l, "mlp.down_proj.weight"), {H, I}, cols(r * il, il), L.down_w);
    }
  } catch (...) {
    free_all();
    throw;
  }
}

void LlamaModel::load_moe(Layer& L, int64_t l, const FillFn& fill) {
  // Tensor parallelism as vLLM's FusedMoE (not expert parallelism): every
  // rank holds all E experts, each cut like a dense MLP (the expert's
  // gate/up rows and down columns of this rank's I / size units), and the
  // shared expert likewise; the router and the shared expert's sigmoid gate
  // are replicated, so every rank routes alike and scales its partials by
  // the same weights. The forward all-reduces the partial sums (no bias to
  // add once: these experts have none).
  const ModelConfig& c = config_;
  const DType dt = backend_.act_dtype();
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const int64_t il = I / tp_.size, r = tp_.rank;  // this rank's units of each expert
  const Shard whole{};
  auto rows = [](int64_t begin, int64_t n) { return Shard{0, begin, n}; };
  auto cols = [](int64_t begin, int64_t n) { return Shard{1, begin, n}; };
  const bool q = c.qwen2_moe_names;
  const std::string base = q ? "mlp." : "block_sparse_moe.";
  L.moe.router = backend_.alloc(dt, {E, H});
  fill(layer_name(l, (base + "gate.weight").c_str()), {E, H}, whole, L.moe.router);
  L.moe.gate_up = backend_.alloc(dt, {E, 2 * il, H});
  L.moe.down = backend_.alloc(dt, {E, H, il});
  const Tensor gu = L.moe.gate_up.view({E * 2 * il, H}), dn = L.moe.down.view({E * H, il});
  for (int64_t e = 0; e < E; ++e) {
    const std::string ex = base + "experts." + std::to_string(e) + ".";
    fill(layer_name(l, (ex + (q ? "gate_proj" : "w1") + ".weight").c_str()), {I, H},
         rows(r * il, il), gu.slice_rows(e * 2 * il, il));
    fill(layer_name(l, (ex + (q ? "up_proj" : "w3") + ".weight").c_str()), {I, H}, rows(r * il, il),
         gu.slice_rows(e * 2 * il + il, il));
    fill(layer_name(l, (ex + (q ? "down_proj" : "w2") + ".weight").c_str()), {H, I},
         cols(r * il, il), dn.slice_rows(e * H, H));
  }
  if (c.shared_expert_intermediate_size > 0) {
    const int64_t Is = c.shared_expert_intermediate_size, is = Is / tp_.size;
    L.moe.shared_gate_up = backend_.alloc(dt, {2 * is, H});
    fill(layer_name(l, "mlp.shared_expert.gate_proj.weight"), {Is, H}, rows(r * is, is),
         L.moe.shared_gate_up.slice_rows(0, is));
    fill(layer_name(l, "mlp.shared_expert.up_proj.weight"), {Is, H}, rows(r * is, is),
         L.moe.shared_gate_up.slice_rows(is, is));
    L.moe.shared_down = backend_.alloc(dt, {H, is});
    fill(layer_name(l, "mlp.shared_expert.down_proj.weight"), {H, Is}, cols(r * is, is),
         L.moe.shared_down);
    L.moe.shared_gate = backend_.alloc(dt, {1, H});
    fill(layer_name(l, "mlp.shared_expert_gate.weight"), {1, H}, whole, L.moe.shared_gate);
  }
}

void LlamaModel::load_weights(const std::string& model_dir) {
  SafetensorsModel st(model_dir);
  load_stats_ = {};
  std::vector<unsigned char> strided;  // a column shard, packed
  const QuantConfig& qc = config_.quantization;
  std::set<std::string> used;  // the checkpoint tensors read
  load_from([&](const std::string& name, const std::vector<int64_t>& shape, const Shard& shard,
                Tensor dst) {
    used.insert(name);
    // A quantized linear: <module>.{qweight, qzeros, scales, g_idx} in place
    // of <module>.weight; this rank's shard of the packed tensors goes to
    // the backend (engine/quant/quantized_weight.h).
    const std::string suffix = "_proj.weight";
    if (qc.enabled() && shape.size() == 2 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string module = name.substr(0, name.size() - 7);  // minus ".weight"
      if (!qc.skips(module)) {
        for (const char* part : {".qweight", ".qzeros", ".scales", ".g_idx"})
          used.insert(module + part);
        const QuantizedWeight full = read_quantized_weight(st, module, qc, shape[0], shape[1]);
        const QuantizedWeight mine =
            tp_.size == 1 ? full
                          : shard_quantized_weight(full, shard.dim, shard.begin, shard.count);
        backend_.load_quantized_linear(dst, mine);
        (shard.dim < 0 ? load_stats_.replicated_bytes : load_stats_.sharded_bytes) +=
            mine.packed_bytes();
        load_stats_.device_bytes += backend_.weight_bytes(dst);
        ++load_stats_.quantized_linears;
        if (dst.dtype == DType::I32) ++load_stats_.packed_linears;
        return;
      }
    }
    const SafetensorsTensor& t = st.get(name);  // throws naming file + tensor
    if (t.shape != shape) {
      std::string ws = "[";
      for (size_t i = 0; i < shape.size(); ++i) ws += (i ? ", " : "") + std::to_string(shape[i]);
      throw std::runtime_error("weights " + t.file + ": tensor '" + name + "' has shape " +
                               t.shape_str() + ", config expects " + ws + "]");
    }
    const size_t bytes = static_cast<size_t>(dst.numel()) * dtype_size(t.dtype);
    const bool all =
        shard.dim < 0 || (shard.begin == 0 && shard.count == shape[static_cast<size_t>(shard.dim)]);
    if (shard.transposed) {  // [in, out] -> this destination's [count, in], on the host
      const int64_t in = shape[0], out = shape[1];
      std::vector<float> full(static_cast<size_t>(in * out)),
          mine(static_cast<size_t>(shard.count * in));
      host_to_f32(t.data, t.dtype, full.data(), in * out);
      for (int64_t o = 0; o < shard.count; ++o)
        for (int64_t i = 0; i < in; ++i)
          mine[static_cast<size_t>(o * in + i)] =
              full[static_cast<size_t>(i * out + shard.begin + o)];
      backend_.copy_from_host(dst, mine.data(), DType::F32);
      backend_.synchronize();  // `mine` goes away
    } else if (all) {
      backend_.copy_from_host(dst, t.data, t.dtype);
    } else if (shard.dim == 0) {  // a contiguous range of the mapping
      backend_.copy_from_host(dst, safetensors_rows(t, shard.begin, shard.count), t.dtype);
    } else {  // strided reads from the mapping
      safetensors_columns(t, shard.begin, shard.count, strided);
      backend_.copy_from_host(dst, strided.data(), t.dtype);
      backend_.synchronize();  // `strided` is reused by the next column shard
    }
    (shard.dim < 0 ? load_stats_.replicated_bytes : load_stats_.sharded_bytes) += bytes;
    load_stats_.device_bytes += dst.nbytes();
  });
  try {
    check_unused_tensors(st, used, config_);
    if (config_.norm_head) normalize_head_rows(backend_, lm_head_, &st.get("lm_head.weight"));
  } catch (...) {
    backend_.synchronize();
    free_all();
    throw;
  }
  backend_.synchronize();  // the mmap'd sources go away with `st`
}

void LlamaModel::load_dummy_weights(uint64_t seed) {
  // Matrices: Backend::fill_normal (drawn on the device by the CUDA backend,
  // so a 7B model fills in about a second instead of a minute of host RNG),
  // one seed per tensor derived from `seed` (and the rank: with tensor
  // parallelism each rank draws its own shard, so dummy weights differ
  // from the TP=1 ones; they are for benchmarks). Norm weights: ones.
  uint64_t index = 0;
  std::vector<float> ones;
  load_stats_ = {};
  load_from([&](const std::string& name, const std::vector<int64_t>& shape, const Shard& shard,
                Tensor dst) {
    (void)shape;
    ++index;
    load_stats_.device_bytes += backend_.weight_bytes(dst);
    if (dst.dtype == DType::I32) {  // a packed quantized linear
      backend_.fill_quantized_dummy(dst, seed * 1000003u + index);
      ++load_stats_.packed_linears;
    } else if (name.find("norm") != std::string::npos) {
      ones.assign(static_cast<size_t>(dst.numel()), 1.0f);
      backend_.copy_from_host(dst, ones.data(), DType::F32);  // waits: `ones` is reused
    } else {
      const uint64_t rank_salt = shard.dim < 0 ? 0 : static_cast<uint64_t>(tp_.rank) * 7919u;
      backend_.fill_normal(dst, 0.0f, 0.02f, seed * 1000003u + index + rank_salt * 1000u);
    }
  });
  if (config_.norm_head) normalize_head_rows(backend_, lm_head_, nullptr);
  backend_.synchronize();
}

size_t LlamaModel::kv_bytes_per_block(const ModelConfig& c, int64_t block_size, DType dtype,
                                      int64_t tp_size) {
  validate_tensor_parallel(c, tp_size);
  return 2 * static_cast<size_t>(c.num_hidden_layers) * static_cast<size_t>(block_size) *
         static_cast<size_t>(c.num_key_value_heads / tp_size) * static_cast<size_t>(c.head_dim) *
         dtype_size(dtype);
}

void LlamaModel::allocate_kv_cache(int64_t num_blocks, int64_t block_size) {
  if (layers_.empty()) throw std::logic_error("LlamaModel::allocate_kv_cache before weights");
  if (num_blocks <= 0 || block_size <= 0)
    throw std::invalid_argument(
        "LlamaModel::allocate_kv_cache: blocks and block_size must be positive");
  const DType dt = backend_.act_dtype();
  for (Layer& L : layers_) {
    if (!L.kv.k.empty()) backend_.free(L.kv.k);
    if (!L.kv.v.empty()) backend_.free(L.kv.v);
  }
  num_kv_blocks_ = 0;
  for (Layer& L : layers_) {
    L.kv.k = backend_.alloc(dt, {num_blocks, block_size, local_kv_heads_, config_.head_dim});
    L.kv.v = backend_.alloc(dt, {num_blocks, block_size, local_kv_heads_, config_.head_dim});
    backend_.fill_zero(L.kv.k);
    backend_.fill_zero(L.kv.v);
  }
  num_kv_blocks_ = num_blocks;
  block_size_ = block_size;
}

void LlamaModel::allocate_host_kv_cache(int64_t num_blocks) {
  if (num_kv_blocks_ <= 0)
    throw std::logic_error("LlamaModel::allocate_host_kv_cache before allocate_kv_cache");
  if (num_blocks < 0)
    throw std::invalid_argument("LlamaModel::allocate_host_kv_cache: negative block count");
  backend_.free_host_kv_cache(host_kv_);
  host_kv_ = {};
  if (num_blocks == 0) return;
  const Tensor& k = layers_.front().kv.k;
  host_kv_ = backend_.alloc_host_kv_cache(static_cast<int64_t>(layers_.size()), num_blocks,
                                          k.nbytes() / static_cast<size_t>(k.dim(0)));
}

std::vector<LayerKVCache> LlamaModel::kv_caches() const {
  std::vector<LayerKVCache> c;
  c.reserve(layers_.size());
  for (const Layer& L : layers_) c.push_back(L.kv);
  return c;
}

void LlamaModel::swap_out(std::span<const BlockSwap> pairs) {
  if (pairs.empty()) return;
  const std::vector<LayerKVCache> c = kv_caches();
  backend_.swap_out(c, host_kv_, pairs);
}

void LlamaModel::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  const std::vector<LayerKVCache> c = kv_caches();
  backend_.copy_blocks(c, copies);
}

void LlamaModel::swap_in(std::span<const BlockSwap> pairs) {
  if (pairs.empty()) return;
  const std::vector<LayerKVCache> c = kv_caches();
  backend_.swap_in(c, host_kv_, pairs);
}

void LlamaModel::allocate_workspace(int64_t max_num_tokens, int64_t max_num_seqs,
                                    int64_t max_positions) {
  if (max_num_tokens <= 0 || max_num_seqs <= 0 || max_positions <= 0)
    throw std::invalid_argument("LlamaModel::allocate_workspace: sizes must be positive");
  const ModelConfig& c = config_;
  const DType dt = backend_.act_dtype();
  const int64_t T = max_num_tokens, L = std::min(max_num_seqs, max_num_tokens);
  const int64_t H = c.hidden_size, I = local_intermediate_, D = c.head_dim;
  const int64_t Hq = local_heads_, Hk = local_kv_heads_;
  for (Tensor* t :
       {&ws_.hidden, &ws_.residual, &ws_.normed, &ws_.qkv, &ws_.q, &ws_.attn_out, &ws_.gate_up,
        &ws_.mlp_act, &ws_.mlp_out, &ws_.last_hidden, &ws_.logits, &rope_.cos_sin, &alibi_slopes_})
    if (!t->empty()) backend_.free(*t);
  ws_.hidden = backend_.alloc(dt, {T, H});
  ws_.residual = backend_.alloc(dt, {T, H});
  ws_.normed = backend_.alloc(dt, {T, H});
  ws_.qkv = backend_.alloc(dt, {T, (Hq + 2 * Hk) * D});
  ws_.q = backend_.alloc(dt, {T, Hq * D});
  ws_.attn_out = backend_.alloc(dt, {T, Hq * D});
  ws_.gate_up = backend_.alloc(dt, {T, 2 * I});
  ws_.mlp_act = backend_.alloc(dt, {T, I});
  if (c.parallel_residual) ws_.mlp_out = backend_.alloc(dt, {T, H});
  ws_.last_hidden = backend_.alloc(dt, {L, H});
  ws_.logits = backend_.alloc(DType::F32, {L, c.vocab_size});
  max_num_tokens_ = T;
  max_num_logits_ = L;

  const int64_t R = c.rotary_dims();
  rope_.rotary_dim = R;
  rope_.interleaved = c.rope_interleaved;
  if (R > 0) {
    const std::vector<float> table = rope_cos_sin_table(c, max_positions);
    rope_.cos_sin = backend_.alloc(DType::F32, {max_positions, R});
    backend_.copy_from_host(rope_.cos_sin, table.data(), DType::F32);
  }
  if (c.alibi) {
    // The slopes of all heads, then this rank's heads' (tensor parallelism;
    // vLLM slices them likewise).
    const std::vector<float> all = alibi_slopes(c.num_attention_heads);
    const std::vector<float> slopes(all.begin() + tp_.rank * local_heads_,
                                    all.begin() + (tp_.rank + 1) * local_heads_);
    alibi_slopes_ = backend_.alloc(DType::F32, {local_heads_});
    backend_.copy_from_host(alibi_slopes_, slopes.data(), DType::F32);
  }
  backend_.synchronize();
}

Tensor LlamaModel::forward(const DeviceBatch& b) {
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens, L = b.num_logits;
  if (layers_.empty() || num_kv_blocks_ == 0 || max_num_tokens_ == 0)
    throw std::logic_error("LlamaModel::forward before load/allocate_kv_cache/allocate_workspace");
  if (T <= 0 || T > max_num_tokens_)
    throw std::invalid_argument("LlamaModel::forward: " + std::to_string(T) +
                                " tokens (workspace holds " + std::to_string(max_num_tokens_) +
                                ")");
  const int64_t Hq = local_heads_, Hk = local_kv_heads_, D = c.head_dim;  // this rank's heads
  const bool reduce = tp_.size > 1;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale =
      static_cast<float>(c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(static_cast<double>(D)));
  const GatedActivation act_kind =
      c.hidden_act == "gelu_pytorch_tanh" ? GatedActivation::GeluTanh : GatedActivation::SiLU;
  const MoeOptions moe_opts{c.num_experts_per_tok, c.norm_topk_prob};
  const Activation ungated_act = c.hidden_act == "gelu" ? Activation::Gelu : Activation::GeluTanh;
  Tensor hidden = ws_.hidden.first_rows(T), residual = ws_.residual.first_rows(T);
  Tensor normed = ws_.normed.first_rows(T), qkv = ws_.qkv.first_rows(T);
  Tensor q = ws_.q.first_rows(T), attn = ws_.attn_out.first_rows(T);
  Tensor gate_up = ws_.gate_up.first_rows(T), act = ws_.mlp_act.first_rows(T);

  // RMSNorm or LayerNorm (with bias) as the config says; out may alias x.
  auto norm = [&](const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
    if (c.layer_norm)
      backend_.layer_norm(x, w, bias, eps, out);
    else
      backend_.rms_norm(x, w, eps, out);
  };
  auto add_norm = [&](const Tensor& x, Tensor& res, const Tensor& w, const Tensor& bias,
                      Tensor& out) {
    if (c.layer_norm)
      backend_.add_layer_norm(x, res, w, bias, eps, out);
    else
      backend_.add_rms_norm(x, res, w, eps, out);
  };
  auto opt = [](const Tensor& t) { return t.empty() ? nullptr : &t; };
  // The MLP of layer ly on `in` into `out` [T, H] (this rank's partial sum
  // under tensor parallelism: the caller reduces).
  auto mlp = [&](Layer& ly, const Tensor& in, Tensor& out) {
    if (c.num_experts > 0) {
      backend_.moe(in, ly.moe, moe_opts, out);
    } else if (c.gated_mlp) {
      backend_.linear(in, ly.gate_up_w, nullptr, gate_up);
      backend_.gated_act(gate_up, act_kind, act);
      backend_.linear(act, ly.down_w, nullptr, out);
    } else {
      backend_.linear(in, ly.gate_up_w, opt(ly.gate_up_b), act);
      backend_.activation(act, ungated_act, act);
      backend_.linear(act, ly.down_w, opt(ly.down_b), out);
    }
  };

  backend_.embedding(b.input_ids, embed_tokens_, residual);
  if (c.learned_positions) {  // GPT-2: + wpe[position]
    backend_.embedding(b.positions, wpe_, normed);
    backend_.add(normed, residual);
  }
  if (c.embedding_scale != 1.0) backend_.scale(residual, static_cast<float>(c.embedding_scale));
  if (c.embedding_norm) backend_.layer_norm(residual, embed_norm_w_, embed_norm_b_, eps, residual);
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& ly = layers_[l];
    if (l == 0)
      norm(residual, ly.input_norm, ly.input_norm_b, normed);
    else
      add_norm(hidden, residual, ly.input_norm, ly.input_norm_b,
               normed);  // += previous layer's out
    backend_.linear(normed, ly.qkv_w, opt(ly.qkv_b), qkv);
    if (c.qk_norm) backend_.head_rms_norm(qkv, ly.q_norm, ly.k_norm, Hq, Hk, D, eps);
    backend_.rope_and_cache(qkv, rope_, b, Hq, Hk, D, q, ly.kv);
    const AttentionOptions ao{c.layer_sliding_window[l], static_cast<float>(c.attn_logit_softcap),
                              alibi_slopes_};
    if (ao.plain())
      backend_.attention(q, ly.kv, b, Hq, Hk, D, scale, attn);
    else
      backend_.attention_ext(q, ly.kv, b, Hq, Hk, D, scale, ao, attn);
    backend_.linear(attn, ly.o_w, opt(ly.o_b), hidden);
    if (reduce) comm_->all_reduce_sum(hidden);  // row-parallel o_proj: sum the ranks' partials
    if (c.parallel_residual) {  // x += attn(norm(x)) + mlp(norm'(x)): `hidden` gets both
      if (c.parallel_two_norms) norm(residual, ly.post_attn_norm, ly.post_attn_norm_b, normed);
      Tensor mlp_out = ws_.mlp_out.first_rows(T);
      mlp(ly, normed, mlp_out);
      backend_.add(mlp_out, hidden);
      continue;
    }
    if (c.sandwich_norm) {  // Gemma 2: norm the attention output before the residual add
      backend_.rms_norm(hidden, ly.attn_out_norm, eps, normed);
      backend_.add_rms_norm(normed, residual, ly.post_attn_norm, eps, normed);
    } else {
      add_norm(hidden, residual, ly.post_attn_norm, ly.post_attn_norm_b, normed);
    }
    mlp(ly, normed, hidden);
    // Row-parallel down_proj (dense), or the experts' and the shared
    // expert's row-parallel down projections (MoE): sum the ranks' partials.
    if (reduce) comm_->all_reduce_sum(hidden);
    if (c.sandwich_norm) {  // Gemma 2: norm the MLP output (kept in `hidden` for the next add)
      backend_.rms_norm(hidden, ly.mlp_out_norm, eps, hidden);
    }
  }
  last_num_tokens_ = T;
  const int64_t n = std::min(L, max_num_logits_);
  if (n == 0) return ws_.logits.first_rows(0);
  return logits_for(b.logits_indices.first_rows(n));
}

Tensor LlamaModel::logits_for(const Tensor& indices) {
  const int64_t L = indices.numel();
  if (L > max_num_logits_)
    throw std::invalid_argument("LlamaModel::logits_for: " + std::to_string(L) +
                                " logits rows (workspace holds " + std::to_string(max_num_logits_) +
                                ")");
  Tensor logits = ws_.logits.first_rows(L);
  if (L == 0) return logits;
  // Only the rows asked for need the final norm and lm_head: gather the
  // last MLP output and the residual stream, then add + norm on L rows.
  const int64_t T = last_num_tokens_;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor last_res = ws_.last_hidden.first_rows(L), last_x = ws_.normed.first_rows(L);
  backend_.gather_rows(ws_.residual.first_rows(T), indices, last_res);
  backend_.gather_rows(ws_.hidden.first_rows(T), indices, last_x);
  if (config_.layer_norm)
    backend_.add_layer_norm(last_x, last_res, final_norm_, final_norm_b_, eps, last_x);
  else
    backend_.add_rms_norm(last_x, last_res, final_norm_, eps, last_x);
  backend_.linear(last_x, lm_head_, lm_head_b_.empty() ? nullptr : &lm_head_b_, logits);
  if (config_.final_logit_softcap > 0)
    backend_.softcap(logits, static_cast<float>(config_.final_logit_softcap));
  return logits;
}

}  // namespace pagoda
