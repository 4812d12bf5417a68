#include "engine/model/rope.h"

#include <cmath>

#include "engine/cpu/half.h"

namespace pagoda {

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int64_t dim = c.rotary_dims(), half = dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j)
    inv[static_cast<size_t>(j)] =
        1.0 / std::pow(c.rope_theta, static_cast<double>(2 * j) / static_cast<double>(dim));
  const RopeScaling& s = c.rope_scaling;
  if (s.rope_type == "linear") {
    for (double& f : inv) f /= s.factor;
  } else if (s.rope_type == "llama3") {
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / s.low_freq_factor;
    const double high_freq_wavelen = old_len / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      double g = wavelen > low_freq_wavelen ? f / s.factor : f;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      if (medium) {
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        g = (1.0 - smooth) * g / s.factor + smooth * g;
      }
      f = g;
    }
  }
  if (c.rope_inv_freq_bf16)  // as a bf16-cast model's inv_freq buffer holds them
    for (double& f : inv) f = cpu::bf16_to_f32(cpu::f32_to_bf16(static_cast<float>(f)));
  return inv;
}

std::vector<float> rope_cos_sin_table(const ModelConfig& c, int64_t max_positions) {
  const std::vector<double> inv = rope_inv_freq(c);
  const size_t half = inv.size(), d = 2 * half;
  std::vector<float> table(static_cast<size_t>(max_positions) * d);
  for (int64_t p = 0; p < max_positions; ++p) {
    float* row = table.data() + static_cast<size_t>(p) * d;
    for (size_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(p) * inv[j];
      row[j] = static_cast<float>(std::cos(a));
      row[half + j] = static_cast<float>(std::sin(a));
      if (c.rope_table_bf16) {
        row[j] = cpu::bf16_to_f32(cpu::f32_to_bf16(row[j]));
        row[half + j] = cpu::bf16_to_f32(cpu::f32_to_bf16(row[half + j]));
      }
    }
  }
  return table;
}

}  // namespace pagoda
