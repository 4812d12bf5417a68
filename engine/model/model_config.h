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

// Llama 3.x "llama3" rope scaling (transformers' _compute_llama3_parameters).
struct RopeScaling {
  std::string rope_type;  // "" (none), "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // "LlamaForCausalLM" or "Qwen2ForCausalLM"
  std::string model_type;    // "llama", "qwen2"
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
  bool mlp_bias = false;
  std::string hidden_act = "silu";
  DType torch_dtype = DType::F32;  // the checkpoint's dtype
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id (int or list)
  // config.json's quantization_config (engine/quant/quant_config.h);
  // method None for a float checkpoint.
  QuantConfig quantization;

  // Reads and validates <dir>/config.json. Throws std::runtime_error naming
  // the file and the field for a missing/malformed file, an unsupported
  // architecture or hidden_act, or inconsistent sizes (e.g. heads not
  // dividing, rope_scaling type unknown, use_sliding_window true).
  static ModelConfig from_dir(const std::string& model_dir);
  // Same, from the text of a config.json; `source` names it in errors.
  static ModelConfig from_json_text(const std::string& text, const std::string& source);
};

// Megatron-style tensor parallelism (arXiv:1909.08053): rank `rank` of
// `size` holds heads [rank*Hq/size, (rank+1)*Hq/size), KV heads likewise,
// and intermediate columns [rank*I/size, (rank+1)*I/size). size 1 = no TP.
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// Throws std::runtime_error naming the numbers when tp_size < 1 or when
// num_attention_heads, num_key_value_heads or intermediate_size is not
// divisible by tp_size (KV heads are not replicated across ranks).
void validate_tensor_parallel(const ModelConfig& config, int64_t tp_size);

}  // namespace pagoda
