// ModelConfig: everything the Llama-family forward needs, read from a Hugging
// Face config.json (transformers' LlamaConfig / Qwen2Config field names).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/quant/quant_config.h"

namespace pagoda {

// config.json's rope_scaling (rope.h computes the frequencies):
// "linear" (factor), "llama3" (transformers' _compute_llama3_parameters:
// factor, low/high_freq_factor, original_max_position_embeddings) and
// "yarn" (transformers' _compute_yarn_parameters, vLLM's
// YaRNScalingRotaryEmbedding: factor, beta_fast, beta_slow,
// original_max_position_embeddings, attention_factor).
struct RopeScaling {
  std::string rope_type;  // "" (none), "linear", "dynamic", "llama3", "yarn"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3: 8192 when absent. yarn: the context the model was trained on,
  // for the correction range; 0 when absent (max_position_embeddings then).
  int64_t original_max_position_embeddings = 8192;
  // yarn: the rotations bounding the blend of extrapolated (fast) and
  // interpolated (slow) dimensions, and the factor cos and sin are scaled
  // by (0 when absent: 0.1 ln(factor) + 1, YaRN's mscale).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;
};

struct ModelConfig {
  // LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, Qwen3ForCausalLM,
  // Phi3ForCausalLM, MixtralForCausalLM, Gemma2ForCausalLM, Qwen2MoeForCausalLM,
  // AquilaForCausalLM / AquilaModel (the Llama layout), BaiChuanForCausalLM /
  // BaichuanForCausalLM (W_pack; ALiBi for the 13B models), the GPT family
  std::string architecture;
  std::string model_type;  // "llama", "qwen2", "mistral", ...
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2: always)
  bool mlp_bias = false;        // the MLP's linears have biases (GPT family)
  // "silu", "gelu_pytorch_tanh" (Gemma 2, BLOOM), "gelu" (erf), "gelu_new" (tanh)
  std::string hidden_act = "silu";
  DType torch_dtype = DType::F32;  // the checkpoint's dtype
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id (int or list)
  // config.json's quantization_config (engine/quant/quant_config.h);
  // method None for a float checkpoint.
  QuantConfig quantization;

  // ---- options of the wider family (issue 18), all off for Llama/Qwen2 ----
  // The checkpoint stores q/k/v as one tensor self_attn.<fused_qkv>.weight
  // [(Hq+2Hk)*D, H], rows q, k, v: "qkv_proj" (Phi-3), "W_pack" (Baichuan);
  // "" for separate q_proj / k_proj / v_proj.
  std::string fused_qkv;
  // The checkpoint stores gate/up as one mlp.gate_up_proj [2I, H], gate
  // rows then up rows (Phi-3).
  bool fused_gate_up = false;
  // Baichuan2's NormHead (vLLM: vocab_size 125696): every lm_head row is
  // divided by its L2 norm at load (in fp32, from the checkpoint's values).
  bool norm_head = false;
  // Per-head RMSNorm of q and k before rotary, weights self_attn.{q,k}_norm
  // [head_dim] (Qwen3).
  bool qk_norm = false;
  // Per layer: the sliding window in positions (0 = full causal attention).
  // Mistral/Mixtral/Phi-3: sliding_window on every layer; Gemma 2: on the
  // layers whose layer_types entry is "sliding_attention".
  std::vector<int64_t> layer_sliding_window;
  // Gemma: RMSNorm weights used as (1 + w) (Gemma2RMSNorm).
  bool norm_one_plus = false;
  // Gemma 2: post_attention_layernorm normalises the attention output and
  // pre/post_feedforward_layernorm wrap the MLP (four norms per layer).
  bool sandwich_norm = false;
  double embedding_scale = 1.0;    // the embedding output is multiplied by it (Gemma: sqrt(H))
  double attn_logit_softcap = 0;   // Gemma 2's attn_logit_softcapping (0: none)
  double final_logit_softcap = 0;  // Gemma 2's final_logit_softcapping (0: none)
  double attn_scale = 0;  // softmax scale; 0 = head_dim^-0.5 (Gemma 2: query_pre_attn_scalar^-0.5)
  // Mixture of experts (num_experts 0: a dense MLP). Mixtral: experts
  // block_sparse_moe.experts.N.w{1,3,2} of intermediate_size units,
  // router block_sparse_moe.gate; Qwen2-MoE: mlp.experts.N.{gate,up,down}_proj
  // of moe_intermediate_size units, router mlp.gate, and a shared expert
  // mlp.shared_expert.* of shared_expert_intermediate_size units gated by
  // sigmoid(mlp.shared_expert_gate).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;
  bool qwen2_moe_names = false;  // Qwen2-MoE's tensor names (else Mixtral's)
  // ---- the GPT-style families (GPT-2, GPT-NeoX, GPT-J, Falcon, BLOOM) ----
  // Which checkpoint naming and fused-q/k/v layout the weights follow:
  // "llama" (model.layers.N.*) or the architecture's model_type.
  std::string family = "llama";
  // LayerNorm with bias (eps: rms_norm_eps, read from layer_norm_epsilon /
  // layer_norm_eps) instead of RMSNorm.
  bool layer_norm = false;
  // x += attn(norm(x)) + mlp(norm'(x)) (GPT-J, GPT-NeoX's
  // use_parallel_residual, Falcon's parallel_attn); parallel_two_norms:
  // norm' is a second LayerNorm (NeoX), else the same output (GPT-J, Falcon).
  bool parallel_residual = false;
  bool parallel_two_norms = false;
  // Rotary dims per head: -1 all head_dim (the Llama family, Falcon), 0 none
  // (GPT-2, BLOOM), else the first rotary_dim (GPT-NeoX, GPT-J); GPT-J's
  // rotate_every_two when rope_interleaved. rotary_dims() resolves -1.
  int64_t rotary_dim = -1;
  int64_t rotary_dims() const { return rotary_dim < 0 ? head_dim : rotary_dim; }
  bool rope_interleaved = false;
  bool alibi = false;              // BLOOM, Baichuan-13B / Baichuan2-13B
  bool learned_positions = false;  // GPT-2's wpe [max_position_embeddings, H]
  bool embedding_norm = false;     // BLOOM's word_embeddings_layernorm
  bool gated_mlp = true;           // false: down(act(up x + b) ) (GPT family)
  bool o_bias = false;             // attention output projection bias
  bool lm_head_bias = false;       // GPT-J
  // Not read from config.json: rounds the rotary inverse frequencies to
  // bf16 (rope_inv_freq), as they are in an HF model cast to bf16 (the
  // inv_freq buffer is cast with the weights) and then upcast to float32.
  // The references of shared/models/arch were made that way; the tests set
  // this to reproduce them exactly. Serving keeps float frequencies (vLLM's
  // and HF's float32 behaviour).
  bool rope_inv_freq_bf16 = false;
  // Likewise for a model whose precomputed sin/cos table is the buffer cast
  // to bf16 (GPT-J's embed_positions): rounds the table's values.
  bool rope_table_bf16 = false;
  bool has_sliding_window() const {
    for (int64_t w : layer_sliding_window)
      if (w > 0) return true;
    return false;
  }

  // Reads and validates <dir>/config.json. Throws std::runtime_error naming
  // the file and the field for a missing/malformed file, an unsupported
  // architecture or hidden_act, or inconsistent sizes (e.g. heads not
  // dividing, rope_scaling type unknown, use_sliding_window true).
  static ModelConfig from_dir(const std::string& model_dir);
  // Same, from the text of a config.json; `source` names it in errors.
  static ModelConfig from_json_text(const std::string& text, const std::string& source);
};

// The context length the config allows (vLLM's _get_and_verify_max_len):
// max_position_embeddings, times rope_scaling.factor for "linear", and for
// "yarn" original_max_position_embeddings (else max_position_embeddings)
// times factor; "llama3" tables already cover max_position_embeddings.
int64_t derived_max_model_len(const ModelConfig& config);

// Megatron-style tensor parallelism (arXiv:1909.08053): rank `rank` of
// `size` holds heads [rank*Hq/size, (rank+1)*Hq/size), KV heads likewise,
// and intermediate columns [rank*I/size, (rank+1)*I/size). size 1 = no TP.
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// Throws std::runtime_error naming the numbers when tp_size < 1 or when
// num_attention_heads, num_key_value_heads or the MLP's width is not
// divisible by tp_size (KV heads are not replicated across ranks). The
// MLP's width: intermediate_size for a dense MLP; for mixture-of-experts
// models (every rank holds every expert, each cut by its intermediate units
// as vLLM's FusedMoE does under tensor parallelism) the experts' width
// (Mixtral: intermediate_size; Qwen2-MoE: moe_intermediate_size) and the
// shared expert's (shared_expert_intermediate_size), each named in the
// message. Families other than "llama" refuse tp_size > 1.
void validate_tensor_parallel(const ModelConfig& config, int64_t tp_size);

}  // namespace pagoda
