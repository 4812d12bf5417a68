// Position encodings computed on the host: rotary-embedding frequencies
// and the cos/sin table (RoFormer, arXiv:2104.09864), in double precision,
// and ALiBi's per-head slopes.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace pagoda {

// inv_freq[j] = rope_theta^(-2j/R) for j < R/2, R = config.rotary_dims()
// (head_dim, or GPT-NeoX's / GPT-J's partial rotary dims), then scaled as
// config.rope_scaling says: "linear" divides by factor (transformers'
// _compute_linear_scaling_rope_parameters), "llama3" follows transformers'
// _compute_llama3_parameters (Llama 3.1: long wavelengths / factor, short
// ones kept, a smooth blend between), "yarn" follows transformers'
// _compute_yarn_parameters and vLLM's YaRNScalingRotaryEmbedding (YaRN,
// Peng et al. 2023, arXiv:2309.00071): the dimensions that turn fewer than
// beta_slow times over original_max_position_embeddings positions are
// interpolated (/ factor), those that turn more than beta_fast times are
// kept, with a linear ramp between (bounds floored / ceiled, clamped to
// [0, R - 1]); "dynamic" raises the base as vLLM's
// DynamicNTKScalingRotaryEmbedding does for its one table of
// max_position_embeddings * factor positions: base * (factor^2 - factor +
// 1)^(R / (R - 2)). With config.rope_inv_freq_bf16 each frequency is then
// rounded to bf16 (round to nearest even).
std::vector<double> rope_inv_freq(const ModelConfig& config);

// The factor cos and sin are multiplied by: yarn's attention_factor, or
// 0.1 ln(factor) + 1 when the config gives none (1 when factor <= 1, as
// vLLM's yarn_get_mscale); 1 for every other rope type.
double rope_attention_factor(const ModelConfig& config);

// The table RopeTable::cos_sin holds: [max_positions, R] row-major F32 with
// row p = a * (cos(p*inv_freq[0..R/2)), sin(p*inv_freq[0..R/2))), a =
// rope_attention_factor(config), each value rounded to bf16 with
// config.rope_table_bf16.
std::vector<float> rope_cos_sin_table(const ModelConfig& config, int64_t max_positions);

// ALiBi slopes of n heads (Press et al., arXiv:2108.12409) as HF
// transformers' build_alibi_tensor (BLOOM), Baichuan-13B's _get_interleave
// and vLLM's _get_alibi_slopes compute them: the geometric series
// 2^(-8k/m), k = 1..m, of the largest power of two m <= n, then every other
// term (k = 1, 3, ...) of the series of 2m for the remaining n - m heads.
std::vector<float> alibi_slopes(int64_t n);

}  // namespace pagoda
