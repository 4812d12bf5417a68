// The GPU sampling kernel of gpu/gpu_sampler.h (see there for the method).
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "gpu/cuda_check.h"
#include "gpu/gpu_sampler.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// Order-preserving map of a float's bits to an unsigned key (-inf lowest).
__device__ __forceinline__ uint32_t ordered_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Philox4x32-10 (Salmon et al. 2011, Random123's constants).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const uint32_t lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

__device__ __forceinline__ float gumbel(uint64_t seed, int64_t i) {
  const uint4 r = philox4x32_10(make_uint4(static_cast<uint32_t>(i >> 2), static_cast<uint32_t>(i >> 34), 0u, 0u),
                                make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
  const uint32_t w = (i & 3) == 0 ? r.x : (i & 3) == 1 ? r.y : (i & 3) == 2 ? r.z : r.w;
  const float u = (static_cast<float>(w >> 8) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
  return -logf(-logf(u));
}

template <typename V>
__device__ V block_sum(V v, V* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  V t = lane < kWarps ? smem[lane] : V(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// Arg-max with ties to the lowest index.
__device__ void block_argmax(float& v, int& idx, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) { v = ov; idx = oi; }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) { sv[warp] = v; si[warp] = idx; }
  __syncthreads();
  v = lane < kWarps ? sv[lane] : -INFINITY;
  idx = lane < kWarps ? si[lane] : INT_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) { v = ov; idx = oi; }
  }
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* __restrict__ logits, int vocab,
                                                         const GpuSampleParams* __restrict__ params,
                                                         int32_t* __restrict__ out) {
  __shared__ float sv[kWarps];
  __shared__ int si[kWarps];
  __shared__ float sf[kWarps];
  __shared__ unsigned long long su[kWarps];
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;
  const GpuSampleParams p = params[row];

  float best = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i];
    if (v > best || (v == best && i < bi)) { best = v; bi = i; }
  }
  block_argmax(best, bi, sv, si);
  if (p.temperature < 1e-5f) {
    if (threadIdx.x == 0) out[row] = bi == INT_MAX ? 0 : bi;
    return;
  }
  const float inv_t = 1.0f / p.temperature;
  const float m = best * inv_t;
  uint32_t lo = 0;  // keep tokens whose key >= lo
  if (p.min_p > 0.f) lo = ordered_key(m + logf(p.min_p));
  if (p.top_k > 0 && p.top_k < vocab) {
    uint32_t k_key = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = k_key | (1u << bit);
      unsigned long long c = 0;
      for (int i = threadIdx.x; i < vocab; i += kThreads) c += ordered_key(x[i] * inv_t) >= cand;
      if (block_sum(c, su) >= static_cast<unsigned long long>(p.top_k)) k_key = cand;
    }
    lo = max(lo, k_key);
  }
  if (p.top_p < 1.f) {
    float s = 0.f;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = x[i] * inv_t;
      if (ordered_key(v) >= lo) s += __expf(v - m);
    }
    const float target = p.top_p * block_sum(s, sf);
    uint32_t p_key = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = max(p_key | (1u << bit), lo);
      float c = 0.f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float v = x[i] * inv_t;
        if (ordered_key(v) >= cand) c += __expf(v - m);
      }
      if (block_sum(c, sf) >= target) p_key |= (1u << bit);
    }
    lo = max(lo, p_key);
  }
  float bs = -INFINITY;
  int bsi = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i] * inv_t;
    if (ordered_key(v) < lo || v == -INFINITY) continue;
    const float s = v + gumbel(p.seed, i);
    if (s > bs || (s == bs && i < bsi)) { bs = s; bsi = i; }
  }
  block_argmax(bs, bsi, sv, si);
  if (threadIdx.x == 0) out[row] = bsi == INT_MAX ? (bi == INT_MAX ? 0 : bi) : bsi;
}

}  // namespace

void launch_sample(const float* logits, int64_t rows, int64_t vocab, const GpuSampleParams* params,
                   int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, static_cast<int>(vocab), params, out);
  PAGODA_CUDA_CHECK_LAUNCH("sample_kernel");
}

}  // namespace pagoda::cuda
