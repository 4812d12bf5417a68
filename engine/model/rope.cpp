#include "engine/model/rope.h"

#include <algorithm>
#include <cmath>

#include "engine/cpu/half.h"

namespace pagoda {

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int64_t dim = c.rotary_dims(), half = dim / 2;
  const RopeScaling& s = c.rope_scaling;
  // Dynamic NTK as vLLM tabulates it (DynamicNTKScalingRotaryEmbedding,
  // after /u/bloc97 and /u/emozilla): the base raised for a table of
  // L = max_position_embeddings * factor positions,
  // base' = base * (factor * L / max_position_embeddings - (factor - 1))^(d / (d - 2))
  //       = base * (factor^2 - factor + 1)^(d / (d - 2)).
  double base = c.rope_theta;
  if (s.rope_type == "dynamic" && dim > 2)
    base *= std::pow(s.factor * s.factor - (s.factor - 1.0),
                     static_cast<double>(dim) / static_cast<double>(dim - 2));
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j)
    inv[static_cast<size_t>(j)] =
        1.0 / std::pow(base, static_cast<double>(2 * j) / static_cast<double>(dim));
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
  } else if (s.rope_type == "yarn") {
    // The dimension that turns `rotations` times over the original context.
    const double orig = static_cast<double>(s.original_max_position_embeddings > 0
                                                ? s.original_max_position_embeddings
                                                : c.max_position_embeddings);
    const auto correction_dim = [&](double rotations) {
      return static_cast<double>(dim) * std::log(orig / (rotations * 2.0 * M_PI)) /
             (2.0 * std::log(c.rope_theta));
    };
    const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(s.beta_slow)), static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // as transformers, against a zero-width ramp
    for (int64_t j = 0; j < half; ++j) {
      const double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
      const double extrapolated = 1.0 - ramp;  // share of the original frequency
      double& f = inv[static_cast<size_t>(j)];
      f = (f / s.factor) * (1.0 - extrapolated) + f * extrapolated;
    }
  }
  if (c.rope_inv_freq_bf16)  // as a bf16-cast model's inv_freq buffer holds them
    for (double& f : inv) f = cpu::bf16_to_f32(cpu::f32_to_bf16(static_cast<float>(f)));
  return inv;
}

double rope_attention_factor(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.rope_type != "yarn") return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  return s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
}

std::vector<float> rope_cos_sin_table(const ModelConfig& c, int64_t max_positions) {
  const std::vector<double> inv = rope_inv_freq(c);
  const double a = rope_attention_factor(c);
  const size_t half = inv.size(), d = 2 * half;
  std::vector<float> table(static_cast<size_t>(max_positions) * d);
  for (int64_t p = 0; p < max_positions; ++p) {
    float* row = table.data() + static_cast<size_t>(p) * d;
    for (size_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(p) * inv[j];
      row[j] = static_cast<float>(a * std::cos(angle));
      row[half + j] = static_cast<float>(a * std::sin(angle));
      if (c.rope_table_bf16) {
        row[j] = cpu::bf16_to_f32(cpu::f32_to_bf16(row[j]));
        row[half + j] = cpu::bf16_to_f32(cpu::f32_to_bf16(row[half + j]));
      }
    }
  }
  return table;
}

std::vector<float> alibi_slopes(int64_t n) {
  int64_t m = 1;
  while (m * 2 <= n) m *= 2;
  std::vector<float> s;
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
  for (int64_t k = 1; k <= m; ++k)
    s.push_back(static_cast<float>(std::pow(base, static_cast<double>(k))));
  if (m != n) {
    const double extra =
        std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * m)) - 3)));
    const int64_t rest = std::min(m, n - m);
    for (int64_t k = 1; k <= 2 * rest; k += 2)
      s.push_back(static_cast<float>(std::pow(extra, static_cast<double>(k))));
  }
  return s;
}

}  // namespace pagoda
