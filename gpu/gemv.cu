// Skinny GEMM for decode-sized batches (M <= 8 rows of x): out[m, n] =
// Σ_k x[m, k] · w[n, k] (+ bias[n]), memory-bound on the weight stream.
// One warp per output column n: each lane streams 16-byte chunks of w's row
// (two rounds of kUnroll chunks in flight, read-only non-allocating loads)
// and dots them with the matching chunks of the M rows of x (L1/L2
// resident); fp32 accumulation, warp-shuffle reduction. Launched with
// programmatic dependent launch (gpu/pdl.h): the first weights stream
// before the wait. Backend::linear uses it for bf16/f16 at M <= 2
// (LtGemm::auto_kernel: beyond that, re-reading x per row from L1 makes it
// slower than the alternatives) when K % 8 == 0 and the pointers are
// 16-byte aligned.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"
#include "gpu/ptx.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarpsPerCta = 8;
constexpr int kUnroll = 4;

template <typename T>
__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += to_f32(x[i]) * to_f32(y[i]);
  return s;
}

template <typename T, typename TO, int M>
__global__ void __launch_bounds__(kWarpsPerCta * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                TO* __restrict__ out, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * kWarpsPerCta + warp;
  const bool live = n < N;
  const int nchunks = live ? K / 8 : 0;
  const T* wr = w + static_cast<int64_t>(live ? n : 0) * K;
  // Two rounds of kUnroll chunks in flight: the next round is loaded
  // before the current one is used. The first round depends on nothing
  // earlier in the stream, so it is issued before pdl_wait_then_release()
  // and overlaps the previous kernel (gpu/pdl.h).
  uint4 wv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = lane + 32 * u;
    wv[u] = c < nchunks ? ld_stream(wr + c * 8) : uint4{0, 0, 0, 0};
  }
  pdl_wait_then_release();
  if (!live) return;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
  for (int c0 = lane; c0 < nchunks; c0 += 32 * kUnroll) {
    uint4 nv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * (kUnroll + u);
      nv[u] = c < nchunks ? ld_stream(wr + c * 8) : uint4{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c < nchunks) {
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const uint4 xv = *reinterpret_cast<const uint4*>(x + static_cast<int64_t>(m) * K + c * 8);
          acc[m] += dot8<T>(wv[u], xv);
        }
      }
      wv[u] = nv[u];
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  if (lane == 0) {
    const float b = bias != nullptr ? to_f32(bias[n]) : 0.f;
#pragma unroll
    for (int m = 0; m < M; ++m) out[static_cast<int64_t>(m) * N + n] = from_f32<TO>(acc[m] + b);
  }
}

template <typename T, typename TO>
void launch_t(const void* x, const void* w, const void* bias, void* out, int M, int N, int K,
              cudaStream_t stream) {
  const dim3 grid((N + kWarpsPerCta - 1) / kWarpsPerCta), block(kWarpsPerCta * 32);
  const T* xp = static_cast<const T*>(x);
  const T* wp = static_cast<const T*>(w);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  const auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, block, 0, stream, xp, wp, bp, op, N, K);
  };
  switch (M) {
    case 1:
      go(gemv_kernel<T, TO, 1>);
      break;
    case 2:
      go(gemv_kernel<T, TO, 2>);
      break;
    case 3:
      go(gemv_kernel<T, TO, 3>);
      break;
    case 4:
      go(gemv_kernel<T, TO, 4>);
      break;
    case 5:
      go(gemv_kernel<T, TO, 5>);
      break;
    case 6:
      go(gemv_kernel<T, TO, 6>);
      break;
    case 7:
      go(gemv_kernel<T, TO, 7>);
      break;
    default:
      go(gemv_kernel<T, TO, 8>);
      break;
  }
  PAGODA_CUDA_CHECK_LAUNCH("gemv_kernel");
}

}  // namespace

bool launch_gemv(DType in_dt, DType out_dt, const void* x, const void* w, const void* bias,
                 void* out, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  if (M < 1 || M > 8 || K % 8 != 0 || K == 0 || N > (int64_t(1) << 30) || !aligned16(x) ||
      !aligned16(w))
    return false;
  return dispatch_half_in(in_dt, out_dt, [&](auto t, auto to) {
    launch_t<typename decltype(t)::type, typename decltype(to)::type>(
        x, w, bias, out, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), stream);
  });
}

}  // namespace pagoda::cuda
