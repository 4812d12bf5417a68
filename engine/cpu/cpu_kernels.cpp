#include "engine/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda::cpu {
namespace {

// Dot product with 8 independent accumulators so -O3 vectorises it without
// -ffast-math (the summation order is fixed, hence deterministic).
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void linear_f32(ThreadPool& pool, const float* x, const float* w, const float* bias, float* out,
                int64_t T, int64_t K, int64_t N) {
  // Tile: a block of 16 weight rows stays in cache while the token rows
  // stream past it, in tiles of 64 tokens.
  constexpr int64_t kRows = 16, kTok = 64;
  const int64_t row_blocks = (N + kRows - 1) / kRows;
  // Grain: enough work per chunk (~64K multiply-adds) to pay for a wake-up.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K * T * kRows));
  pool.parallel_for(row_blocks, grain, [&](int64_t rb0, int64_t rb1) {
    const int64_t n0 = rb0 * kRows, n1 = std::min(N, rb1 * kRows);
    for (int64_t t0 = 0; t0 < T; t0 += kTok) {
      const int64_t t1 = std::min(T, t0 + kTok);
      for (int64_t n = n0; n < n1; ++n) {
        const float* wr = w + n * K;
        const float b = bias ? bias[n] : 0.0f;
        for (int64_t t = t0; t < t1; ++t) out[t * N + n] = dot(x + t * K, wr, K) + b;
      }
    }
  });
}

void rms_norm_f32(const float* x, const float* w, float eps, float* out, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * H;
    float* o = out + t * H;
    const float ms = dot(xr, xr, H) / static_cast<float>(H);
    const float inv = 1.0f / std::sqrt(ms + eps);
    for (int64_t i = 0; i < H; ++i) o[i] = (xr[i] * inv) * w[i];
  }
}

void paged_attention_f32(ThreadPool& pool, const PagedAttnArgs& a, const float* q,
                         const float* k_cache, const float* v_cache, float* out) {
  const int64_t D = a.head_dim, Hq = a.num_heads, Hk = a.num_kv_heads;
  const int64_t group = Hq / Hk;
  // Token -> sequence.
  std::vector<int32_t> seq_of(static_cast<size_t>(a.num_tokens));
  for (int64_t s = 0; s < a.num_seqs; ++s)
    for (int32_t t = a.query_start_loc[s]; t < a.query_start_loc[s + 1]; ++t)
      seq_of[static_cast<size_t>(t)] = static_cast<int32_t>(s);
  const int64_t work = a.num_tokens * Hq;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, a.max_context_len * D));
  pool.parallel_for(work, grain, [&](int64_t w0, int64_t w1) {
    std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(1, a.max_context_len)));
    std::vector<float> acc(static_cast<size_t>(D));
    for (int64_t wi = w0; wi < w1; ++wi) {
      const int64_t t = wi / Hq, h = wi % Hq, kvh = h / group;
      const int32_t* table = a.block_tables + seq_of[static_cast<size_t>(t)] * a.max_blocks_per_seq;
      const int64_t n_ctx = static_cast<int64_t>(a.positions[t]) + 1;  // causal: 0..p
      // Sliding window: keys p' with p' > p - window, i.e. from n_ctx - window.
      const int64_t first =
          a.sliding_window > 0 ? std::max<int64_t>(0, n_ctx - a.sliding_window) : 0;
      const float* qv = q + (t * Hq + h) * D;
      float mx = -INFINITY;
      for (int64_t p = first; p < n_ctx; ++p) {
        const int64_t slot = static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
        float s = dot(qv, k_cache + (slot * Hk + kvh) * D, D) * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
        if (a.alibi) s += a.alibi[h] * static_cast<float>(p);
        scores[static_cast<size_t>(p)] = s;
        mx = std::max(mx, s);
      }
      float sum = 0.0f;
      for (int64_t p = first; p < n_ctx; ++p) {
        const float e = std::exp(scores[static_cast<size_t>(p)] - mx);
        scores[static_cast<size_t>(p)] = e;
        sum += e;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = first; p < n_ctx; ++p) {
        const int64_t slot = static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
        const float* vv = v_cache + (slot * Hk + kvh) * D;
        const float pr = scores[static_cast<size_t>(p)];
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += pr * vv[d];
      }
      float* o = out + (t * Hq + h) * D;
      const float inv = 1.0f / sum;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[static_cast<size_t>(d)] * inv;
    }
  });
}

void silu_mul_f32(const float* gate_up, float* out, int64_t T, int64_t I) {
  for (int64_t t = 0; t < T; ++t) {
    const float* g = gate_up + t * 2 * I;
    const float* u = g + I;
    float* o = out + t * I;
    for (int64_t i = 0; i < I; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void gelu_tanh_mul_f32(const float* gate_up, float* out, int64_t T, int64_t I) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t t = 0; t < T; ++t) {
    const float* g = gate_up + t * 2 * I;
    const float* u = g + I;
    float* o = out + t * I;
    for (int64_t i = 0; i < I; ++i) {
      const float x = g[i];
      o[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * u[i];
    }
  }
}

void layer_norm_f32(const float* x, const float* w, const float* b, float eps, float* out,
                    int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * H;
    float* o = out + t * H;
    float mean = 0.0f;
    for (int64_t i = 0; i < H; ++i) mean += xr[i];
    mean /= static_cast<float>(H);
    float var = 0.0f;
    for (int64_t i = 0; i < H; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<float>(H);
    const float inv = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < H; ++i) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
  }
}

void rope_partial_f32(const float* x, const float* cs, float* out, int64_t D, int64_t rotary_dim,
                      bool interleaved) {
  const int64_t half = rotary_dim / 2;
  const float* c = cs;
  const float* s = cs + half;
  if (interleaved) {
    for (int64_t j = 0; j < half; ++j) {
      const float x1 = x[2 * j], x2 = x[2 * j + 1];
      out[2 * j] = x1 * c[j] - x2 * s[j];
      out[2 * j + 1] = x2 * c[j] + x1 * s[j];
    }
  } else {
    for (int64_t j = 0; j < half; ++j) {
      const float x1 = x[j], x2 = x[j + half];
      out[j] = x1 * c[j] - x2 * s[j];
      out[j + half] = x2 * c[j] + x1 * s[j];
    }
  }
  for (int64_t i = rotary_dim; i < D; ++i) out[i] = x[i];
}

void rope_rotate_f32(const float* x, const float* cs, float* out, int64_t D) {
  const int64_t half = D / 2;
  const float* c = cs;
  const float* s = cs + half;
  for (int64_t j = 0; j < half; ++j) {
    const float x1 = x[j], x2 = x[j + half];
    out[j] = x1 * c[j] - x2 * s[j];
    out[j + half] = x2 * c[j] + x1 * s[j];
  }
}

}  // namespace pagoda::cpu
