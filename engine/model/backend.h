// Backend: the ops the one model definition (engine/model/llama.h) is written
// against. The CPU backend (engine/cpu/, fp32 reference) and the CUDA backend
// (gpu/) implement it; the model never knows which one runs it.
//
// Conventions for every op:
//  * Tensors are contiguous, row-major, on this backend's device, in
//    `act_dtype()` unless a shape comment says otherwise (ids/indices: I32).
//  * T = tokens in the step, B = sequences, H = hidden size,
//    Hq/Hk = query/KV heads, D = head_dim, I = intermediate size, V = vocab.
//  * Ops are asynchronous on the backend's stream (CUDA) or synchronous (CPU);
//    results are visible to later ops in issue order. copy_to_host and
//    synchronize() wait.
//  * Shape or dtype mismatches throw std::invalid_argument (a bug, not input).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/kv/block_swap.h"
#include "engine/model/forward_batch.h"
#include "engine/quant/quantized_weight.h"

namespace pagoda {

// A ForwardBatch copied to the backend's memory (I32 tensors), plus host
// scalars. The backend owns the buffers and may reuse them for the next step
// (CUDA graphs replay over fixed buffers); valid until the next upload_batch.
struct DeviceBatch {
  Tensor input_ids;        // [T] I32
  Tensor positions;        // [T] I32
  Tensor slot_mapping;     // [T] I32
  Tensor query_start_loc;  // [B+1] I32
  Tensor context_lens;     // [B] I32
  Tensor block_tables;     // [B, max_blocks_per_seq] I32
  Tensor logits_indices;   // [L] I32
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_logits = 0;
  int32_t max_query_len = 0;
  int32_t max_context_len = 0;
  int32_t max_blocks_per_seq = 0;
  bool decode_only = false;
};

// Rotary embedding table, precomputed on the host by the model
// (RoFormer, arXiv:2104.09864; rotate-half layout as in HF transformers):
// cos_sin[p, j] = cos(p * inv_freq[j]) for j < D/2 and
// cos_sin[p, D/2 + j] = sin(p * inv_freq[j]); shape [max_positions, D], F32.
// Partial rotary (GPT-NeoX's rotary_pct, GPT-J's rotary_dim): only the first
// rotary_dim values of each head rotate, the rest pass through; the table is
// then [max_positions, rotary_dim]. rotary_dim 0: no rotary at all (learned
// or ALiBi positions), q and k pass through. interleaved: GPT-J's
// rotate_every_two (pairs (x[2j], x[2j+1]) rotate by angle j) instead of
// rotate-half (pairs (x[j], x[j + rotary_dim/2])).
struct RopeTable {
  Tensor cos_sin;
  int64_t rotary_dim = 0;  // == head_dim for the Llama family
  bool interleaved = false;
};

// One layer's paged KV cache: k and v each [num_blocks, block_size, Hk, D]
// in the cache dtype (act_dtype()).
struct LayerKVCache {
  Tensor k;
  Tensor v;
};

// The swap space's host memory (vLLM v0's CPU KV cache, CacheEngine's
// cpu_cache): every layer's K and V of num_blocks host blocks, each
// block_bytes (one layer's K or V of one block: block_size * Hk * D * the
// cache dtype's size), laid out [layer][K, V][block] so that a run of
// consecutive host blocks of one layer's K (or V) is one contiguous range,
// as a run of device blocks is in LayerKVCache. Owned by the backend that
// allocated it (alloc_host_kv_cache / free_host_kv_cache).
struct HostKVCache {
  std::byte* data = nullptr;
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  size_t block_bytes = 0;
  size_t bytes() const {
    return static_cast<size_t>(num_layers) * 2 * static_cast<size_t>(num_blocks) * block_bytes;
  }
  // Layer `layer`'s K (kv = 0) or V (kv = 1) of host block `block`.
  std::byte* at(int64_t layer, int kv, int64_t block) const {
    return data + ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) *
                       static_cast<size_t>(num_blocks) +
                   static_cast<size_t>(block)) *
                      block_bytes;
  }
};

// Calls copy(device_bytes, host_bytes, n) for every contiguous range a
// swap moves: per run of consecutive pairs (block_runs), per layer, K then
// V (the backends' swap_out / swap_in copy each range their own way).
template <typename Copy>
void for_each_swap_range(std::span<const LayerKVCache> device, const HostKVCache& host,
                         std::span<const BlockSwap> pairs, Copy&& copy) {
  const size_t bb = host.block_bytes;
  for (const BlockRun& r : block_runs(pairs))
    for (size_t l = 0; l < device.size(); ++l)
      for (int kv = 0; kv < 2; ++kv)
        copy(static_cast<std::byte*>(kv == 0 ? device[l].k.data : device[l].v.data) +
                 static_cast<size_t>(r.device) * bb,
             host.at(static_cast<int64_t>(l), kv, r.host), static_cast<size_t>(r.count) * bb);
}

// Calls copy(dst_bytes, src_bytes, n) for every block a copy moves: per
// layer, K then V, per pair (Backend::copy_blocks).
template <typename Copy>
void for_each_block_copy(std::span<const LayerKVCache> caches, std::span<const BlockCopy> copies,
                         Copy&& copy) {
  for (const LayerKVCache& c : caches) {
    const size_t bb = c.k.nbytes() / static_cast<size_t>(c.k.dim(0));
    for (int kv = 0; kv < 2; ++kv) {
      auto* base = static_cast<std::byte*>(kv == 0 ? c.k.data : c.v.data);
      for (const BlockCopy& p : copies)
        copy(base + static_cast<size_t>(p.dst) * bb, base + static_cast<size_t>(p.src) * bb, bb);
    }
  }
}

// Checks a block copy's ids (Backend::copy_blocks): in [0, blocks of the
// cache), src != dst. Throws std::invalid_argument naming `op`.
inline void check_block_copies(const char* op, std::span<const LayerKVCache> caches,
                               std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  if (caches.empty()) throw std::invalid_argument(std::string(op) + ": no KV cache");
  const int64_t n = caches.front().k.dim(0);
  for (const BlockCopy& c : copies)
    if (c.src < 0 || c.src >= n || c.dst < 0 || c.dst >= n || c.src == c.dst)
      throw std::invalid_argument(std::string(op) + ": block copy " + std::to_string(c.src) +
                                  " -> " + std::to_string(c.dst) + " out of range (" +
                                  std::to_string(n) + " blocks)");
}

// Checks a swap's arguments (Backend::swap_out / swap_in): one device cache
// per host layer, block sizes equal, every id in range. Throws
// std::invalid_argument naming `op` and the first problem.
inline void check_swap(const char* op, std::span<const LayerKVCache> device,
                       const HostKVCache& host, std::span<const BlockSwap> pairs) {
  const auto bad = [op](const std::string& what) {
    throw std::invalid_argument(std::string(op) + ": " + what);
  };
  if (pairs.empty()) return;
  if (host.data == nullptr) bad("no host KV cache");
  if (static_cast<int64_t>(device.size()) != host.num_layers)
    bad(std::to_string(device.size()) + " device layers for " + std::to_string(host.num_layers) +
        " host layers");
  for (const LayerKVCache& c : device) {
    const int64_t n = c.k.dim(0);
    if (c.k.ndim != 4 || n <= 0 || c.k.nbytes() / static_cast<size_t>(n) != host.block_bytes ||
        c.v.nbytes() != c.k.nbytes())
      bad("device block of " + c.k.shape_str() + " does not match the host blocks of " +
          std::to_string(host.block_bytes) + " bytes");
    for (const BlockSwap& p : pairs)
      if (p.device < 0 || p.device >= n || p.host < 0 || p.host >= host.num_blocks)
        bad("block pair (device " + std::to_string(p.device) + ", host " + std::to_string(p.host) +
            ") out of range");
  }
}

// Options of Backend::attention_ext beyond plain causal attention.
struct AttentionOptions {
  // > 0: the query at position p sees only keys at positions > p - window
  // (the last `window` positions, itself included), as HF transformers'
  // sliding_window_overlay (Mistral, Gemma 2's sliding layers). 0: all 0..p.
  int64_t sliding_window = 0;
  // > 0: scores s = q·k·scale become cap * tanh(s / cap) before the softmax
  // (Gemma 2's attn_logit_softcapping). 0: none.
  float logit_softcap = 0.0f;
  // Non-empty: ALiBi (Press et al., arXiv:2108.12409; BLOOM): F32 [Hq], and
  // every score of head h gains alibi_slopes[h] * (the key's position), as
  // HF transformers' build_alibi_tensor adds it.
  Tensor alibi_slopes;
  bool plain() const {
    return sliding_window == 0 && logit_softcap == 0.0f && alibi_slopes.empty();
  }
};

// Activations of Backend::gated_act (the MLP's gate, HF ACT2FN names).
enum class GatedActivation {
  SiLU,      // "silu": x * sigmoid(x) (SwiGLU)
  GeluTanh,  // "gelu_pytorch_tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GeGLU)
};

// Activations of Backend::activation (ungated MLPs: GPT-2, GPT-NeoX, ...).
enum class Activation {
  Gelu,      // "gelu": 0.5 x (1 + erf(x / sqrt(2)))
  GeluTanh,  // "gelu_new", "gelu_pytorch_tanh", BLOOM's gelu: the tanh approximation above
};

// One mixture-of-experts layer's weights (Mixtral's block_sparse_moe,
// Qwen2-MoE's mlp), E experts of I units each, in act_dtype():
//  * router [E, H] (nn.Linear layout);
//  * gate_up [E, 2I, H]: expert e's gate (w1 / gate_proj) rows then its up
//    (w3 / up_proj) rows; down [E, H, I] (w2 / down_proj);
//  * optional shared expert (Qwen2-MoE): shared_gate_up [2Is, H],
//    shared_down [H, Is], shared_gate [1, H]; empty tensors when absent.
// Under tensor parallelism (LlamaModel, vLLM's FusedMoE sharding) I and Is
// are this rank's share of the units, and Backend::moe computes this
// rank's partial sum of the output (linear in the experts' down
// projections, so the ranks' partials add up to the whole); backends take
// I and Is from these tensors' shapes, never from the config.
struct MoeWeights {
  Tensor router, gate_up, down;
  Tensor shared_gate_up, shared_down, shared_gate;
};

// Routing of Backend::moe.
struct MoeOptions {
  int64_t top_k = 2;
  // true: the top-k softmax probabilities are divided by their sum
  // (Mixtral; Qwen2-MoE's norm_topk_prob); false: used as they are.
  bool renormalize = true;
};

// Ops beyond the Llama set that a backend may lack; the model asks
// Backend::implements for each one its config needs and refuses to load,
// naming them, when one is missing (never a silently wrong result).
enum class BackendOp {
  AttentionSlidingWindow,
  AttentionSoftcap,
  HeadRmsNorm,
  GeluTanhMul,
  Softcap,
  Scale,
  Moe,
  LayerNorm,
  Activation,
  Add,
  PartialRotary,      // rotary_dim < head_dim, or 0 (no rotary)
  InterleavedRotary,  // GPT-J's rotate_every_two
  Alibi,
};
const char* backend_op_name(BackendOp op);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;     // "cpu", "cuda:0 (NVIDIA H200)"
  virtual DType act_dtype() const = 0;      // activations, weights, KV cache

  // ---- memory ---------------------------------------------------------
  // Allocates an uninitialised tensor. Throws std::runtime_error (naming the
  // bytes asked for) when out of memory.
  virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
  virtual void free(Tensor& t) = 0;  // sets t.data = nullptr
  // Bytes this backend could still allocate (CUDA: free device memory;
  // CPU: the `kv_cache_memory` budget policy is the caller's).
  virtual size_t free_memory_bytes() const = 0;
  // Bytes of memory of the device in all (CUDA: the card; CPU: system RAM).
  virtual size_t total_memory_bytes() const = 0;

  // Copies n host elements of src_dtype (F32/F16/BF16/I32) into dst,
  // converting to dst.dtype (float types only convert among themselves).
  virtual void copy_from_host(Tensor& dst, const void* src, DType src_dtype) = 0;
  // Copies src to host memory as F32 (float src) or I32 (I32 src); waits.
  virtual void copy_to_host(void* dst, const Tensor& src) = 0;
  virtual void fill_zero(Tensor& t) = 0;
  // Fills a float tensor with normal(mean, std) samples drawn from `seed`
  // (dummy weights for benchmarks). Deterministic per backend and seed, not
  // across backends. This default draws on the host (std::mt19937_64) and
  // copies; the CUDA backend overrides it with a device-side fill.
  virtual void fill_normal(Tensor& t, float mean, float std, uint64_t seed) {
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      throw std::invalid_argument("fill_normal: float tensor expected");
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(mean, std);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    for (float& v : host) v = dist(rng);
    copy_from_host(t, host.data(), DType::F32);
  }
  virtual void synchronize() = 0;
  // Loads a GPTQ/AWQ linear (engine/quant/quantized_weight.h) into dst, a
  // float [N, K] tensor in act_dtype() (nn.Linear layout, as linear() reads
  // it). This default dequantizes on the host to fp32 and converts on upload
  // (copy_from_host): the CPU backend's path, and the CUDA backend's until it
  // has int4/int8 kernels (which would override this to keep w packed).
  virtual void load_quantized_linear(Tensor& dst, const QuantizedWeight& w) {
    if (dst.ndim != 2 || dst.shape[0] != w.out_features || dst.shape[1] != w.in_features)
      throw std::invalid_argument("load_quantized_linear: destination " + dst.shape_str() +
                                  " for " + w.module);
    std::vector<float> host(static_cast<size_t>(dst.numel()));
    dequantize_linear(w, host.data());
    copy_from_host(dst, host.data(), DType::F32);
    synchronize();  // `host` goes away
  }
  // Quantized linears kept packed (int4 / int8 kernels) instead of
  // dequantized at load. True when this backend keeps a linear of `qc`
  // with `in_features` inputs packed: the model then allocates it with
  // alloc_quantized_linear, loads its parts with load_quantized_linear and
  // runs linear() on it. Default: false (the dequantized path above).
  virtual bool keeps_quantized(const QuantConfig& /*qc*/, int64_t /*in_features*/) const {
    return false;
  }
  // A packed linear of N outputs and K inputs: an I32 tensor whose row
  // ranges are the parts load_quantized_linear fills (the backend keeps the
  // scales and zero points beside it; free() releases all). Throws
  // std::logic_error where keeps_quantized is false.
  virtual Tensor alloc_quantized_linear(int64_t /*out_features*/, int64_t /*in_features*/,
                                        const QuantConfig& /*qc*/) {
    throw std::logic_error("alloc_quantized_linear: this backend does not keep linears packed");
  }
  // Dummy values for a packed linear (benchmarks, --load-format dummy).
  virtual void fill_quantized_dummy(Tensor& /*w*/, uint64_t /*seed*/) {
    throw std::logic_error("fill_quantized_dummy: this backend does not keep linears packed");
  }
  // Device bytes a weight takes (a packed linear's scales and zeros
  // included), for the weight-memory log.
  virtual size_t weight_bytes(const Tensor& w) const { return w.nbytes(); }
  // How load_quantized_linear runs here (for the startup log).
  virtual std::string quantized_linear_path() const {
    return std::string("dequantized at load to ") + dtype_name(act_dtype()) +
           " (no int4/int8 kernel yet)";
  }

  // ---- swap space (preemption by swap) ----------------------------------
  // Host memory for num_blocks swap blocks of num_layers layers (see
  // HostKVCache): CUDA: pinned (cudaHostAlloc), so copies run
  // asynchronously; CPU: anonymous pages, committed when first written.
  // Contents are undefined. Throws std::runtime_error naming the bytes when
  // the memory cannot be had.
  virtual HostKVCache alloc_host_kv_cache(int64_t num_layers, int64_t num_blocks,
                                          size_t block_bytes) = 0;
  virtual void free_host_kv_cache(HostKVCache& host) = 0;  // sets host.data = nullptr
  // vLLM's swap_blocks (CacheEngine.swap_out / swap_in): for each pair,
  // device block p.device of every layer's K and V (device[l], the model's
  // caches in layer order) to host block p.host of `host` (swap_out), or
  // back (swap_in). Runs of consecutive pairs (block_runs) move as one
  // range per layer and K/V. Asynchronous on the stream (CUDA: ordered
  // before the ops issued after it, such as the step's forward); the CPU
  // copies at once. Bad arguments throw std::invalid_argument (check_swap).
  virtual void swap_out(std::span<const LayerKVCache> device, const HostKVCache& host,
                        std::span<const BlockSwap> pairs) = 0;
  virtual void swap_in(std::span<const LayerKVCache> device, const HostKVCache& host,
                       std::span<const BlockSwap> pairs) = 0;
  // vLLM v0's copy_blocks (CacheEngine.copy): for each pair, device block
  // c.src of every layer's K and V (caches, in layer order) into block
  // c.dst (a cached partial block a new sequence continues). Asynchronous
  // on the stream like the swaps; the CPU copies at once. Bad ids throw
  // std::invalid_argument (check_block_copies).
  virtual void copy_blocks(std::span<const LayerKVCache> caches,
                           std::span<const BlockCopy> copies) = 0;

  // Uploads the step's metadata into backend-owned buffers.
  virtual const DeviceBatch& upload_batch(const ForwardBatch& batch) = 0;

  // ---- ops --------------------------------------------------------------
  // out[t, :] = table[ids[t], :]. ids [T] I32, table [V, H], out [T, H].
  virtual void embedding(const Tensor& ids, const Tensor& table, Tensor& out) = 0;

  // RMSNorm (Zhang & Sennrich 2019): out = x / sqrt(mean(x^2) + eps) * w,
  // computed in fp32. x, out [T, H]; w [H]. out may alias x.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;

  // Fused residual add + RMSNorm: residual += x; out = rms_norm(residual).
  // x, residual, out [T, H]; w [H]. out may alias x.
  virtual void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps,
                            Tensor& out) = 0;

  // out = x · wᵀ (+ bias). x [T, K], w [N, K] (nn.Linear layout), bias [N] or
  // empty, out [T, N]. out may be F32 when x/w are act_dtype (logits).
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) = 0;

  // Fused rotary embedding + KV-cache write (vLLM's rotary_embedding +
  // reshape_and_cache). qkv [T, (Hq + 2*Hk) * D] is the fused q/k/v
  // projection output (q heads, then k heads, then v heads per row). Applies
  // rotate-half RoPE at batch.positions to q (written to q_out [T, Hq*D]) and
  // to k, then writes k and v into the layer's cache at batch.slot_mapping.
  // qkv is not modified.
  virtual void rope_and_cache(const Tensor& qkv, const RopeTable& rope, const DeviceBatch& batch,
                              int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                              Tensor& q_out, LayerKVCache& cache) = 0;

  // Causal paged attention (vLLM, arXiv:2309.06180) with GQA: for the token t
  // of sequence i at position p, out[t, h] = softmax(q[t,h] · K[i, 0..p]ᵀ ·
  // scale) · V[i, 0..p], K/V read through batch.block_tables; query head h
  // reads KV head h / (Hq / Hk). q, out [T, Hq*D].
  virtual void attention(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                         int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                         Tensor& out) = 0;

  // SwiGLU (Shazeer 2020): out = silu(gate_up[:, :I]) * gate_up[:, I:].
  // gate_up [T, 2I], out [T, I].
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;

  // out[l, :] = x[indices[l], :]. x [T, H], indices [L] I32, out [L, H].
  virtual void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) = 0;

  // ---- ops of the wider model family (BackendOp) ----------------------
  // Which of them this backend implements. Default: none; each one below
  // throws std::logic_error naming the backend unless overridden.
  virtual bool implements(BackendOp /*op*/) const { return false; }

  // attention() with AttentionOptions (sliding window, score soft-capping);
  // same shapes. With opts.plain() this is attention().
  virtual void attention_ext(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                             int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                             const AttentionOptions& opts, Tensor& out) {
    if (opts.plain())
      return attention(q, cache, batch, num_heads, num_kv_heads, head_dim, scale, out);
    missing("attention_ext");
  }
  // Per-head RMSNorm of q and k inside the fused projection output, in
  // place (Qwen3's q_norm / k_norm, before rotary): every head vector of
  // D values of the q part (Hq heads) is normalised and scaled by q_w [D],
  // every head of the k part (Hk heads) by k_w [D]; the v part is left.
  // qkv [T, (Hq + 2*Hk) * D]; computed in fp32.
  virtual void head_rms_norm(Tensor& /*qkv*/, const Tensor& /*q_w*/, const Tensor& /*k_w*/,
                             int64_t /*num_heads*/, int64_t /*num_kv_heads*/, int64_t /*head_dim*/,
                             float /*eps*/) {
    missing("head_rms_norm");
  }
  // out = act(gate_up[:, :I]) * gate_up[:, I:]. gate_up [T, 2I], out [T, I].
  // SiLU is silu_mul().
  virtual void gated_act(const Tensor& gate_up, GatedActivation act, Tensor& out) {
    if (act == GatedActivation::SiLU) return silu_mul(gate_up, out);
    missing("gated_act");
  }
  // x = cap * tanh(x / cap), elementwise in place (Gemma 2's final logit
  // soft-capping). x: any shape, F32 or act_dtype(); cap > 0.
  virtual void softcap(Tensor& /*x*/, float /*cap*/) { missing("softcap"); }
  // x *= s, elementwise in place (Gemma's embedding * sqrt(hidden_size)).
  virtual void scale(Tensor& /*x*/, float /*s*/) { missing("scale"); }
  // A mixture-of-experts MLP (Mixtral, arXiv:2401.04088; Qwen2-MoE), as HF
  // transformers computes it: per token, p = softmax(x · routerᵀ) over E
  // experts in fp32, the top_k largest (renormalised to sum 1 when
  // opts.renormalize), out = sum_k p_k * down_e(silu(gate_e x) * up_e x);
  // with a shared expert, out += sigmoid(x · shared_gateᵀ) * shared(x).
  // x, out [T, H].
  virtual void moe(const Tensor& /*x*/, const MoeWeights& /*w*/, const MoeOptions& /*opts*/,
                   Tensor& /*out*/) {
    missing("moe");
  }
  // LayerNorm (Ba et al. 2016): out = (x - mean) / sqrt(var + eps) * w + b
  // per row, var the biased variance, in fp32. x, out [T, H] (out may alias
  // x); w, b [H].
  virtual void layer_norm(const Tensor& /*x*/, const Tensor& /*w*/, const Tensor& /*b*/,
                          float /*eps*/, Tensor& /*out*/) {
    missing("layer_norm");
  }
  // residual += x; out = layer_norm(residual). out may alias x.
  virtual void add_layer_norm(const Tensor& /*x*/, Tensor& /*residual*/, const Tensor& /*w*/,
                              const Tensor& /*b*/, float /*eps*/, Tensor& /*out*/) {
    missing("add_layer_norm");
  }
  // y += x, elementwise; same shapes.
  virtual void add(const Tensor& /*x*/, Tensor& /*y*/) { missing("add"); }
  // out = act(x), elementwise; out may alias x.
  virtual void activation(const Tensor& /*x*/, Activation /*act*/, Tensor& /*out*/) {
    missing("activation");
  }

 protected:
  [[noreturn]] void missing(const char* op) const {
    throw std::logic_error(op + std::string(": not implemented on the ") + name() + " backend");
  }
};

// The CPU reference backend (fp32; engine/cpu/). num_threads 0 = all cores.
std::unique_ptr<Backend> make_cpu_backend(int num_threads = 0);

}  // namespace pagoda
