// Rotary-embedding frequencies and the cos/sin table (RoFormer,
// arXiv:2104.09864), computed on the host in double precision.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace pagoda {

// inv_freq[j] = rope_theta^(-2j/D) for j < D/2, D = head_dim, then scaled as
// config.rope_scaling says: "linear" divides by factor (transformers'
// _compute_linear_scaling_rope_parameters), "llama3" follows transformers'
// _compute_llama3_parameters (Llama 3.1: long wavelengths / factor, short
// ones kept, a smooth blend between). With config.rope_inv_freq_bf16 each
// frequency is then rounded to bf16 (round to nearest even).
std::vector<double> rope_inv_freq(const ModelConfig& config);

// The table RopeTable::cos_sin holds: [max_positions, D] row-major F32 with
// row p = (cos(p*inv_freq[0..D/2)), sin(p*inv_freq[0..D/2))).
std::vector<float> rope_cos_sin_table(const ModelConfig& config, int64_t max_positions);

}  // namespace pagoda
