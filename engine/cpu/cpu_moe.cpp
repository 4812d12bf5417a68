// The CPU backend's mixture-of-experts MLP (cpu_kernels.h moe_f32): routing
// and expert MLPs as HF transformers' MixtralSparseMoeBlock and
// Qwen2MoeSparseMoeBlock compute them, one token at a time, in fp32.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/cpu/cpu_kernels.h"

namespace pagoda::cpu {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// out += scale * down(silu(gate x) * up x) for one SwiGLU MLP of I units:
// gate_up [2I, H] (gate rows, then up rows), down [H, I]; act scratch [I].
void swiglu_add(const float* x, const float* gate_up, const float* down, int64_t H, int64_t I,
                float scale, std::vector<float>& act, float* out) {
  act.resize(static_cast<size_t>(I));
  for (int64_t i = 0; i < I; ++i) {
    const float g = dot(x, gate_up + i * H, H);
    const float u = dot(x, gate_up + (I + i) * H, H);
    act[static_cast<size_t>(i)] = g / (1.0f + std::exp(-g)) * u;
  }
  for (int64_t h = 0; h < H; ++h) out[h] += scale * dot(act.data(), down + h * I, I);
}

}  // namespace

void moe_f32(ThreadPool& pool, const MoeArgs& a, const float* x, float* out, int64_t T) {
  const int64_t H = a.hidden, E = a.num_experts, I = a.intermediate;
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(E)), act;
    std::vector<int64_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x + t * H;
      float* o = out + t * H;
      std::fill(o, o + H, 0.0f);
      // Softmax over the router logits (max-subtracted).
      float mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) {
        p[static_cast<size_t>(e)] = dot(xr, a.router + e * H, H);
        mx = std::max(mx, p[static_cast<size_t>(e)]);
      }
      float sum = 0.0f;
      for (float& v : p) sum += (v = std::exp(v - mx));
      for (float& v : p) v /= sum;
      // Top-k by probability; ties to the lower expert id (torch.topk's
      // order on ties is unspecified; random weights make ties unlikely).
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        return p[static_cast<size_t>(l)] > p[static_cast<size_t>(r)];
      });
      float top_sum = 0.0f;
      for (int64_t k = 0; k < a.top_k; ++k)
        top_sum += p[static_cast<size_t>(order[static_cast<size_t>(k)])];
      for (int64_t k = 0; k < a.top_k; ++k) {
        const int64_t e = order[static_cast<size_t>(k)];
        float w = p[static_cast<size_t>(e)];
        if (a.renormalize) w /= top_sum;
        swiglu_add(xr, a.gate_up + e * 2 * I * H, a.down + e * H * I, H, I, w, act, o);
      }
      if (a.shared_gate_up) {
        const float g = dot(xr, a.shared_gate, H);
        const float s = 1.0f / (1.0f + std::exp(-g));
        swiglu_add(xr, a.shared_gate_up, a.shared_down, H, a.shared_intermediate, s, act, o);
      }
    }
  });
}

}  // namespace pagoda::cpu
