// Rotary-embedding frequencies and the cos/sin table (RoFormer,
// arXiv:2104.09864), computed on the host in double precision.
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
// ones kept, a smooth blend between). With config.rope_inv_freq_bf16 each
// frequency is then rounded to bf16 (round to nearest even).
std::vector<double> rope_inv_freq(const ModelConfig& config);

// The table RopeTable::cos_sin holds: [max_positions, R] row-major F32 with
// row p = (cos(p*inv_freq[0..R/2)), sin(p*inv_freq[0..R/2))), each value
// rounded to bf16 with config.rope_table_bf16.
std::vector<float> rope_cos_sin_table(const ModelConfig& config, int64_t max_positions);

}  // namespace pagoda
