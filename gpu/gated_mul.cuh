// act(gate) * up over a fused gate_up activation [T, 2I] (gate in columns
// [0, I), up in [I, 2I)) into out [T, I]: the gated MLPs' middle (SwiGLU /
// GeGLU, Shazeer 2020, arXiv:2002.05202). fp32 math per element, so every
// path below gives the same bits. One CTA row of the grid per token row
// (no 64-bit division per element) and 16-byte vectors of gate, up and out
// when I and the pointers allow; otherwise one element per thread.
// Act: a functor `float operator()(float) const` (__device__).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "gpu/dtype_util.cuh"
#include "gpu/pdl.cuh"

namespace pagoda::cuda {

template <typename T, typename Act, int VEC>
__global__ void gated_mul_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t I,
                                 Act act) {
  pdl_wait_then_release();
  const int64_t t = blockIdx.y;
  const T* g = gu + t * 2 * I;
  const T* u = g + I;
  T* o = out + t * I;
  const int64_t n = I / VEC;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float gv[VEC], uv[VEC], ov[VEC];
    load_f32<T, VEC>(g + c * VEC, gv);
    load_f32<T, VEC>(u + c * VEC, uv);
#pragma unroll
    for (int i = 0; i < VEC; ++i) ov[i] = act(gv[i]) * uv[i];
    store_f32<T, VEC>(o + c * VEC, ov);
  }
}

// Launches gated_mul_kernel on `stream` with programmatic dependent launch
// (gpu/pdl.h; no error check: the caller's
// PAGODA_CUDA_CHECK_LAUNCH). T rows beyond 65535 go in slices of grid rows.
template <typename T, typename Act>
void launch_gated_mul_t(const T* gu, T* out, int64_t rows, int64_t I, Act act,
                        cudaStream_t stream) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kThreads = 256;
  const bool vec = I % kVec == 0 && aligned16(gu) && aligned16(out);
  const int64_t per_row = vec ? I / kVec : I;
  const auto bx =
      static_cast<unsigned>(std::min<int64_t>((per_row + kThreads - 1) / kThreads, 1024));
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
    const dim3 grid(bx, static_cast<unsigned>(std::min<int64_t>(65535, rows - r0)));
    const T* g = gu + r0 * 2 * I;
    T* o = out + r0 * I;
    if (vec)
      launch_pdl(gated_mul_kernel<T, Act, kVec>, grid, kThreads, 0, stream, g, o, I, act);
    else
      launch_pdl(gated_mul_kernel<T, Act, 1>, grid, kThreads, 0, stream, g, o, I, act);
  }
}

}  // namespace pagoda::cuda
