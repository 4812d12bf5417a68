// Fused rotary embedding + paged KV-cache write (vLLM's rotary_embedding +
// reshape_and_cache). RoPE: RoFormer (Su et al., arXiv:2104.09864). Of each
// head's D values the first R = rotary_dim rotate and the rest pass through
// (GPT-NeoX's rotary_pct, GPT-J's rotary_dim; R = 0: none), in the pairs of
// HF transformers' apply_rotary_pos_emb, with h = R/2 and j < h:
//   rotate-half:  (x[j], x[j + h]);  GPT-J's rotate_every_two: (x[2j], x[2j+1])
//   out1 = x1 * cos[j] - x2 * sin[j],  out2 = x2 * cos[j] + x1 * sin[j]
// with cos_sin[p, j] = cos(p * inv_freq[j]), cos_sin[p, h + j] = sin(...)
// (engine/cpu/cpu_kernels.cpp rope_partial_f32 is the reference).
// fp32 math, one rounding to the activation dtype. Full rotate-half rotary
// with 16-byte-aligned rows takes the vectorised kernel. Launched with
// programmatic dependent launch (gpu/pdl.h).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"

namespace pagoda::cuda {
namespace {

// Grid (T, head groups): each CTA takes heads_per_cta(D / 2) heads of one token
// (q heads, then k, then v, as in the qkv row) and each thread one pair of
// elements: pair j < R/2 rotates (its two indices as above); pair j >= R/2
// is (2j, 2j+1), which for j from R/2 to D/2 - 1 covers [R, D) and passes
// through. So a decode step's few tokens still spread over many CTAs and
// every thread makes one memory round trip.
constexpr int kThreads = 256;

__host__ __device__ constexpr int heads_per_cta(int half) { return half >= kThreads ? 1 : kThreads / half; }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rope_and_cache_kernel(const T* __restrict__ qkv, const float* __restrict__ cos_sin, int64_t max_pos,
                          const int32_t* __restrict__ positions, const int32_t* __restrict__ slot_mapping,
                          int Hq, int Hk, int D, int R, bool interleaved, T* __restrict__ q_out,
                          T* __restrict__ k_cache, T* __restrict__ v_cache) {
  pdl_wait_then_release();
  const int64_t t = blockIdx.x;
  const int half = D / 2, rh = R / 2;
  const int hpc = heads_per_cta(half);
  const int64_t row_len = static_cast<int64_t>(Hq + 2 * Hk) * D;
  const T* row = qkv + t * row_len;
  const float* cs = nullptr;
  if (R > 0) {
    int64_t pos = positions[t];
    pos = pos < 0 ? 0 : (pos >= max_pos ? max_pos - 1 : pos);  // validated on the host
    cs = cos_sin + pos * R;
  }
  const int64_t slot = slot_mapping[t];
  for (int e = threadIdx.x; e < hpc * half; e += blockDim.x) {
    const int h = blockIdx.y * hpc + e / half, j = e % half;
    if (h >= Hq + 2 * Hk) break;
    const T* src = row + static_cast<int64_t>(h) * D;  // q heads, k heads, v heads: contiguous
    if (h >= Hq + Hk) {                                 // v: copied unchanged
      if (slot < 0) continue;
      T* dst = v_cache + (slot * Hk + (h - Hq - Hk)) * static_cast<int64_t>(D);
      dst[j] = src[j];
      dst[j + half] = src[j + half];
      continue;
    }
    T* dst = nullptr;
    if (h < Hq) dst = q_out + t * static_cast<int64_t>(Hq) * D + static_cast<int64_t>(h) * D;
    else if (slot >= 0) dst = k_cache + (slot * Hk + (h - Hq)) * static_cast<int64_t>(D);
    if (dst == nullptr) continue;
    if (j >= rh) {  // past the rotary part: (2j, 2j+1) unchanged
      dst[2 * j] = src[2 * j];
      dst[2 * j + 1] = src[2 * j + 1];
      continue;
    }
    const int i1 = interleaved ? 2 * j : j;
    const int i2 = interleaved ? 2 * j + 1 : j + rh;
    const float x1 = to_f32(src[i1]), x2 = to_f32(src[i2]);
    const float c = cs[j], s = cs[rh + j];
    dst[i1] = from_f32<T>(x1 * c - x2 * s);
    dst[i2] = from_f32<T>(x2 * c + x1 * s);
  }
}

// Full rotate-half RoPE (R = D, the Llama / Qwen / Mistral layout) in
// 16-byte vectors: each thread takes VEC consecutive pairs (x[j..j+VEC),
// x[j+h..j+h+VEC)) of one head, h = D / 2, and their cos / sin, so a token's
// row moves in whole vectors (the kernel above moves 2-byte elements).
// Same math per element as rope_and_cache_kernel. Grid (T, units / kThreads)
// with units = (Hq + 2 Hk) * h / VEC.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    rope_and_cache_vec_kernel(const T* __restrict__ qkv, const float* __restrict__ cos_sin, int64_t max_pos,
                              const int32_t* __restrict__ positions, const int32_t* __restrict__ slot_mapping,
                              int Hq, int Hk, int D, T* __restrict__ q_out, T* __restrict__ k_cache,
                              T* __restrict__ v_cache) {
  pdl_wait_then_release();
  const int64_t t = blockIdx.x;
  const int half = D / 2, per_head = half / VEC;
  const int u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= (Hq + 2 * Hk) * per_head) return;
  const int h = u / per_head, j = (u % per_head) * VEC;
  const T* src = qkv + t * static_cast<int64_t>(Hq + 2 * Hk) * D + static_cast<int64_t>(h) * D;
  const int64_t slot = slot_mapping[t];
  T* dst;
  if (h < Hq) dst = q_out + (t * Hq + h) * static_cast<int64_t>(D);
  else if (slot < 0) return;
  else if (h < Hq + Hk) dst = k_cache + (slot * Hk + (h - Hq)) * static_cast<int64_t>(D);
  else dst = v_cache + (slot * Hk + (h - Hq - Hk)) * static_cast<int64_t>(D);
  float x1[VEC], x2[VEC];
  load_f32<T, VEC>(src + j, x1);
  load_f32<T, VEC>(src + j + half, x2);
  if (h >= Hq + Hk) {  // v: copied unchanged (bf16/f16 -> fp32 -> back is exact)
    store_f32<T, VEC>(dst + j, x1);
    store_f32<T, VEC>(dst + j + half, x2);
    return;
  }
  int64_t pos = positions[t];
  pos = pos < 0 ? 0 : (pos >= max_pos ? max_pos - 1 : pos);  // validated on the host
  const float* cs = cos_sin + pos * D;
  float o1[VEC], o2[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const float c = cs[j + i], sn = cs[half + j + i];
    o1[i] = x1[i] * c - x2[i] * sn;
    o2[i] = x2[i] * c + x1[i] * sn;
  }
  store_f32<T, VEC>(dst + j, o1);
  store_f32<T, VEC>(dst + j + half, o2);
}

}  // namespace

void launch_rope_and_cache(DType dt, const void* qkv, const float* cos_sin, int64_t max_pos,
                           const int32_t* positions, const int32_t* slot_mapping, int64_t T,
                           int Hq, int Hk, int D, int rotary_dim, bool interleaved, void* q_out,
                           void* k_cache, void* v_cache, cudaStream_t stream) {
  if (rotary_dim < 0 || rotary_dim > D || rotary_dim % 2 != 0 || D % 2 != 0 ||
      (rotary_dim > 0 && cos_sin == nullptr))
    throw std::invalid_argument("rope_and_cache: rotary_dim " + std::to_string(rotary_dim) +
                                " for head_dim " + std::to_string(D));
  if (T == 0) return;
  const bool vec = !interleaved && rotary_dim == D && aligned16(qkv) && aligned16(q_out) && aligned16(k_cache) &&
                   aligned16(v_cache);
  if (vec && dt != DType::F32 && D % 16 == 0) {  // 8 pairs of 2-byte elements: 16-byte halves
    const int units = (Hq + 2 * Hk) * (D / 16);
    const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((units + kThreads - 1) / kThreads));
    PAGODA_DISPATCH_FLOAT(
        dt, "rope_and_cache",
        launch_pdl(rope_and_cache_vec_kernel<scalar_t, 8>, grid, kThreads, 0, stream,
                   static_cast<const scalar_t*>(qkv), cos_sin, max_pos, positions, slot_mapping, Hq,
                   Hk, D, static_cast<scalar_t*>(q_out), static_cast<scalar_t*>(k_cache),
                   static_cast<scalar_t*>(v_cache)));
    PAGODA_CUDA_CHECK_LAUNCH("rope_and_cache_vec_kernel");
    return;
  }
  if (vec && dt == DType::F32 && D % 8 == 0) {  // 4 pairs of fp32
    const int units = (Hq + 2 * Hk) * (D / 8);
    const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((units + kThreads - 1) / kThreads));
    launch_pdl(rope_and_cache_vec_kernel<float, 4>, grid, kThreads, 0, stream,
               static_cast<const float*>(qkv), cos_sin, max_pos, positions, slot_mapping, Hq, Hk, D,
               static_cast<float*>(q_out), static_cast<float*>(k_cache),
               static_cast<float*>(v_cache));
    PAGODA_CUDA_CHECK_LAUNCH("rope_and_cache_vec_kernel");
    return;
  }
  const int hpc = heads_per_cta(D / 2);
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((Hq + 2 * Hk + hpc - 1) / hpc));
  PAGODA_DISPATCH_FLOAT(
      dt, "rope_and_cache",
      launch_pdl(rope_and_cache_kernel<scalar_t>, grid, kThreads, 0, stream,
                 static_cast<const scalar_t*>(qkv), cos_sin, max_pos, positions, slot_mapping, Hq,
                 Hk, D, rotary_dim, interleaved, static_cast<scalar_t*>(q_out),
                 static_cast<scalar_t*>(k_cache), static_cast<scalar_t*>(v_cache)));
  PAGODA_CUDA_CHECK_LAUNCH("rope_and_cache_kernel");
}

}  // namespace pagoda::cuda
