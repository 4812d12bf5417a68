// Per-head RMSNorm of q and k inside the fused q/k/v projection output
// (Qwen3's q_norm / k_norm before rotary; Backend::head_rms_norm): one warp
// per (token, head), fp32 sum of squares, in place.
#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"

namespace pagoda::cuda {
namespace {

template <typename T>
__global__ void head_rms_norm_kernel(T* qkv, const T* __restrict__ q_w, const T* __restrict__ k_w,
                                     int Hq, int D, int64_t W, float eps) {
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;  // q heads [0, Hq), then k heads
  T* x = qkv + t * W + static_cast<int64_t>(h) * D;
  const T* w = h < Hq ? q_w : k_w;
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += 32) {
    const float v = to_f32(x[i]);
    ss += v * v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / static_cast<float>(D) + eps);
  // Each lane writes only the elements it read.
  for (int i = threadIdx.x; i < D; i += 32) x[i] = from_f32<T>(to_f32(x[i]) * inv * to_f32(w[i]));
}

}  // namespace

void launch_head_rms_norm(DType dt, void* qkv, const void* q_w, const void* k_w, int64_t T, int Hq,
                          int Hk, int D, float eps, cudaStream_t stream) {
  if (T == 0) return;
  const int64_t W = static_cast<int64_t>(Hq + 2 * Hk) * D;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(Hq + Hk));
  PAGODA_DISPATCH_FLOAT(dt, "head_rms_norm",
                        head_rms_norm_kernel<scalar_t><<<grid, 32, 0, stream>>>(
                            static_cast<scalar_t*>(qkv), static_cast<const scalar_t*>(q_w),
                            static_cast<const scalar_t*>(k_w), Hq, D, W, eps));
  PAGODA_CUDA_CHECK_LAUNCH("head_rms_norm_kernel");
}

}  // namespace pagoda::cuda
