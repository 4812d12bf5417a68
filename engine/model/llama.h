// LlamaModel: the one definition of the Llama family's forward (Llama 2/3,
// TinyLlama, Chinese-LLaMA; Qwen2 as a row of options: q/k/v bias,
// rope_theta, untied lm_head), written against Backend ops. Further rows of
// options (ModelConfig, issue 18): sliding-window attention per layer
// (Mistral, Gemma 2), per-head q/k RMSNorm (Qwen3), fused qkv_proj /
// gate_up_proj checkpoints (Phi-3) and W_pack (Baichuan), ALiBi without
// rotary (Baichuan-13B, as BLOOM's), Baichuan2's row-normalised lm_head
// (NormHead, applied at load), mixture-of-experts MLPs (Mixtral,
// Qwen2-MoE with its shared expert), Gemma 2's (1 + w) norms, sandwich norms,
// GELU(tanh) MLP, embedding scaling, attention and final logit soft-capping.
// The constructor refuses (std::runtime_error, naming them) a config that
// needs ops the backend does not implement (Backend::implements).
//
// Per layer (HF transformers' LlamaDecoderLayer, pre-norm):
//   h = rms_norm(x); qkv = h·Wqkvᵀ(+b); rope + cache write; a = attn(q, KV);
//   x += a·Woᵀ; h = rms_norm(x); x += (silu(h·Wgᵀ) * h·Wuᵀ)·Wdᵀ
// then final rms_norm, gather the rows that need logits, lm_head (tied to the
// embedding when tie_word_embeddings).
//
// Tensor parallelism (Megatron-LM, arXiv:1909.08053, section 3) as a row of
// options on this same definition: with TensorParallel{rank, size > 1}
//  * q/k/v (and their Qwen2 biases) and gate/up are column-parallel: this
//    rank holds the output rows of its Hq/size query heads, Hk/size KV heads
//    and I/size intermediate units, so attention and SwiGLU run on local
//    heads/units with no communication;
//  * o_proj and down_proj are row-parallel: this rank holds the input columns
//    matching its heads/units, produces a partial [T, H] sum, and the
//    Communicator all-reduces it (two all-reduces per layer);
//  * mixture-of-experts MLPs (Mixtral, Qwen2-MoE) are sharded as vLLM's
//    FusedMoE under tensor parallelism (model_executor/layers/fused_moe/
//    layer.py; not expert parallelism): every rank holds all E experts,
//    each expert's gate/up cut column-parallel and its down row-parallel
//    over the expert's intermediate units (MoeWeights gate_up [E, 2I/size,
//    H], down [E, H, I/size]), the shared expert likewise ([2Is/size, H],
//    [H, Is/size]); the router [E, H] and the shared expert's gate [1, H]
//    are replicated, so every rank picks the same top-k experts with the
//    same weights from the same x, and the MLP's one all-reduce sums the
//    ranks' partial outputs (the experts have no biases to add once);
//  * the embedding, the norms and lm_head are replicated on every rank (every
//    rank computes the same logits; the executor samples rank 0's). A
//    vocabulary-parallel embedding/lm_head would save V*H*(size-1)/size
//    weights per rank at the cost of a gather; a later optimisation;
//  * the KV cache holds only this rank's Hk/size heads.
// Each rank reads only its shards from the safetensors mapping.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/model/backend.h"
#include "engine/model/model_config.h"

namespace pagoda {

class LlamaModel {
 public:
  // tp.size > 1 needs `comm` (rank tp.rank of tp.size; not owned, outlives
  // the model). Throws std::runtime_error when tp does not divide the heads,
  // KV heads or intermediate size (the experts' and the shared expert's for
  // mixture-of-experts models; validate_tensor_parallel), and
  // std::invalid_argument when comm is missing or does not match tp.
  LlamaModel(const ModelConfig& config, Backend& backend, TensorParallel tp = {},
             Communicator* comm = nullptr);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Reads HF tensor names (model.embed_tokens.weight, model.layers.N.self_attn.
  // {q,k,v,o}_proj.weight[/bias], mlp.{gate,up,down}_proj.weight,
  // {input,post_attention}_layernorm.weight, model.norm.weight, lm_head.weight)
  // from model_dir's model.safetensors or model.safetensors.index.json shards
  // (mmap), converts to backend.act_dtype() and uploads; q/k/v and gate/up are
  // fused on upload. With config.quantization (GPTQ/AWQ) each {q,k,v,o,gate,
  // up,down}_proj is read as <module>.{qweight,qzeros,scales,g_idx}, this
  // rank's shard of the packed tensors taken (shard_quantized_weight) and
  // handed to Backend::load_quantized_linear; the rest stays float. Throws std::runtime_error
  // naming the file and tensor for a missing tensor, a wrong shape, an unsupported dtype, or
  // a tensor the model has no parameter for (vLLM's "There is no module or parameter named
  // ..."), except those vLLM's loaders skip (logged at debug): rotary embedding buffers
  // (rotary_emb.inv_freq, ...), the head of tied embeddings, GPT-2 / GPT-J / GPT-NeoX
  // attention-mask buffers, an extra bias (Llama-style models and GPT-J).
  void load_weights(const std::string& model_dir);
  // Random weights (normal, std 0.02; norms 1) from the config alone, for
  // benchmarks (`--load-format dummy`).
  void load_dummy_weights(uint64_t seed);

  // Bytes of KV cache one block takes over all layers (K and V) on one rank
  // of tp_size (num_key_value_heads / tp_size heads).
  static size_t kv_bytes_per_block(const ModelConfig& config, int64_t block_size, DType dtype,
                                   int64_t tp_size = 1);
  // Allocates num_blocks blocks of block_size tokens for every layer.
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size);
  // The swap space: num_blocks host blocks of every layer's K and V
  // (Backend::alloc_host_kv_cache), block_size as allocate_kv_cache's;
  // call after it. 0 frees it. Throws what the backend throws.
  void allocate_host_kv_cache(int64_t num_blocks);
  int64_t num_host_kv_blocks() const { return host_kv_.data ? host_kv_.num_blocks : 0; }
  // Copies KV blocks device -> host (swap_out) or host -> device (swap_in)
  // for every layer (Backend::swap_out / swap_in; asynchronous on CUDA,
  // before later forwards).
  void swap_out(std::span<const BlockSwap> pairs);
  void swap_in(std::span<const BlockSwap> pairs);
  // Copies device KV blocks src -> dst for every layer (Backend::copy_blocks).
  void copy_blocks(std::span<const BlockCopy> copies);
  // Activation buffers for up to max_num_tokens tokens and max_num_seqs
  // logits rows per step; also builds the rope table for max_positions.
  void allocate_workspace(int64_t max_num_tokens, int64_t max_num_seqs, int64_t max_positions);

  // One step. Returns logits [min(batch.num_logits, max_num_logits()),
  // vocab_size] F32 on the backend's device (the first rows of
  // batch.logits_indices), valid until the next forward or logits_for.
  Tensor forward(const DeviceBatch& batch);
  // More logits rows of the last forward's tokens (prompt logprobs may ask
  // for more rows than the workspace holds): indices [n] I32 on the device,
  // n <= max_num_logits(), each in [0, that step's num_tokens). Returns
  // [n, vocab_size] F32 in the same buffer as forward's logits (valid until
  // the next forward or logits_for). Reads the last layer's hidden state,
  // which forward leaves in place (eager steps; a CUDA graph replay keeps
  // its own buffers, so call this only after an eager forward).
  Tensor logits_for(const Tensor& indices);
  int64_t max_num_logits() const { return max_num_logits_; }

  const ModelConfig& config() const { return config_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  // Checkpoint bytes load_weights read (in the file's dtype): of the
  // tensors split among ranks (q/k/v[+bias], o, gate/up, down, the experts'
  // and the shared expert's gate/up/down) and of those every rank holds
  // whole (embedding, norms, lm_head, the MoE router and shared expert gate).
  // A quantized linear counts its packed bytes (QuantizedWeight::
  // packed_bytes) there.
  struct LoadStats {
    size_t sharded_bytes = 0;
    size_t replicated_bytes = 0;
    size_t device_bytes = 0;    // weight bytes this rank holds on its device
    int quantized_linears = 0;  // linears loaded through load_quantized_linear
    int packed_linears = 0;     // of those (or of dummy weights), kept packed by the backend
  };
  const LoadStats& load_stats() const { return load_stats_; }
  int64_t num_kv_blocks() const { return num_kv_blocks_; }
  int64_t block_size() const { return block_size_; }

 private:
  struct Layer {
    // input_norm: before attention; post_attn_norm: before the MLP (HF's
    // post_attention_layernorm in Llama, pre_feedforward_layernorm in
    // Gemma 2). With sandwich_norm, attn_out_norm (Gemma 2's
    // post_attention_layernorm) normalises the attention output and
    // mlp_out_norm (post_feedforward_layernorm) the MLP's. [H]
    Tensor input_norm, post_attn_norm, attn_out_norm, mlp_out_norm;
    Tensor input_norm_b, post_attn_norm_b;  // LayerNorm biases [H] (GPT family) or empty
    Tensor q_norm, k_norm;                  // [D] (Qwen3) or empty
    Tensor o_b, gate_up_b, down_b;  // biases [H], [I] (ungated up), [H] (GPT family) or empty
    MoeWeights moe;                 // experts (num_experts > 0) instead of gate_up_w / down_w
    // Hq, Hk, I below are this rank's share (the config's / tp.size).
    Tensor qkv_w, qkv_b;  // [(Hq+2Hk)*D, H], [(Hq+2Hk)*D] or empty
    Tensor o_w;           // [H, Hq*D]
    Tensor gate_up_w;     // [2I, H]; ungated MLP (gated_mlp false): up [I, H]
    Tensor down_w;        // [H, I]
    LayerKVCache kv;
  };
  struct Workspace {
    Tensor hidden, residual, normed;  // [Tmax, H]
    Tensor qkv;                       // [Tmax, (Hq+2Hk)*D]
    Tensor q, attn_out;               // [Tmax, Hq*D]
    Tensor gate_up;                   // [Tmax, 2I]
    Tensor mlp_act;                   // [Tmax, I]
    Tensor mlp_out;                   // [Tmax, H] (parallel residual only)
    Tensor last_hidden;               // [Lmax, H]
    Tensor logits;                    // [Lmax, V] F32
  };

  void free_all();
  std::vector<Tensor*> layer_tensors(Layer& L);  // every tensor a layer owns
  std::vector<LayerKVCache> kv_caches() const;   // the layers' caches, in order
  // The part of an HF tensor this rank holds: all of it (dim -1), rows
  // [begin, begin+count) (dim 0) or columns [begin, begin+count) (dim 1).
  // transposed: the HF tensor is [in, out] (GPT-2's Conv1D) and the
  // destination [count, in] takes its columns [begin, begin+count)
  // transposed (dim 1).
  struct Shard {
    int dim = -1;
    int64_t begin = 0, count = 0;
    bool transposed = false;
  };
  // Allocates every parameter in the fused layout and calls fill(hf_name,
  // hf_shape, shard, destination) for each HF tensor (hf_shape is the whole
  // tensor's; a destination is a whole parameter or a row slice of a fused
  // one, shaped as the shard). Used by both loaders.
  using FillFn = std::function<void(const std::string& name, const std::vector<int64_t>& shape,
                                    const Shard& shard, Tensor dst)>;
  void load_from(const FillFn& fill);
  // A mixture-of-experts layer's router, experts and shared expert.
  void load_moe(Layer& L, int64_t l, const FillFn& fill);
  // The GPT-style families' tensors (ModelConfig::family: names, fused
  // q/k/v layouts, GPT-2's transposed Conv1D weights); llama_gpt_load.cpp.
  void load_gpt(const FillFn& fill);

  ModelConfig config_;
  Backend& backend_;
  TensorParallel tp_;
  Communicator* comm_ = nullptr;
  int64_t local_heads_ = 0, local_kv_heads_ = 0, local_intermediate_ = 0;  // this rank's share
  LoadStats load_stats_;
  Tensor embed_tokens_, final_norm_, lm_head_;  // lm_head_ aliases embed_tokens_ when tied
  Tensor final_norm_b_, lm_head_b_;             // GPT family: LayerNorm bias, GPT-J's lm_head bias
  Tensor embed_norm_w_, embed_norm_b_;          // BLOOM's word_embeddings_layernorm
  Tensor wpe_;                                  // GPT-2's learned positions [P, H]
  Tensor alibi_slopes_;                         // BLOOM, Baichuan-13B: this rank's [Hq] F32
  std::vector<Layer> layers_;
  RopeTable rope_;
  Workspace ws_;
  int64_t num_kv_blocks_ = 0;
  HostKVCache host_kv_;  // the swap space (empty: none)
  int64_t block_size_ = 16;
  int64_t max_num_tokens_ = 0;
  int64_t max_num_logits_ = 0;
  int64_t last_num_tokens_ = 0;  // tokens of the last forward (logits_for)
};

}  // namespace pagoda
