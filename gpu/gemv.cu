// Skinny GEMM for decode-sized batches (M <= 8 rows of x): out[m, n] =
// Σ_k x[m, k] · w[n, k] (+ bias[n]), memory-bound on the weight stream.
// 2^log_s warps per output column n (split-k: each takes a contiguous
// slice of w's row; split_log picks it so small-N shapes such as o_proj
// and down still fill the GPU), each lane streaming 16-byte chunks of its
// slice (two rounds of kUnroll chunks in flight, read-only non-allocating
// loads) and dotting them with the matching chunks of the M rows of x,
// which for M <= 2 are staged once per CTA in shared memory (else read
// through L1). fp32 accumulation, warp-shuffle reduction, then the slices
// summed in order through shared memory. Launched with programmatic
// dependent launch (gpu/pdl.h): the first weights stream before the wait.
// Backend::linear uses it for bf16/f16 at M <= 2 (LtGemm::auto_kernel:
// beyond that, re-reading x per row makes it slower than the alternatives)
// when K % 8 == 0 and the pointers are 16-byte aligned.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
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

template <typename T, typename TO, int M, bool XS>
__global__ void __launch_bounds__(kWarpsPerCta * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                TO* __restrict__ out, int N, int K, int log_s) {
  extern __shared__ __align__(16) unsigned char gemv_smem[];
  __shared__ float red[kWarpsPerCta][M];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int S = 1 << log_s;  // warps a row (split-k)
  const int n = blockIdx.x * (kWarpsPerCta >> log_s) + (warp >> log_s);
  const int slice = warp & (S - 1);
  const bool live = n < N;
  const int nchunks = K / 8;
  const int c_end = live ? static_cast<int>(static_cast<int64_t>(slice + 1) * nchunks / S) : 0;
  const int c_begin = live ? static_cast<int>(static_cast<int64_t>(slice) * nchunks / S) : 0;
  const T* wr = w + static_cast<int64_t>(live ? n : 0) * K;
  // Two rounds of kUnroll chunks in flight: the next round is loaded
  // before the current one is used. The first round depends on nothing
  // earlier in the stream, so it is issued before pdl_wait() and overlaps
  // the previous kernel (gpu/pdl.h).
  uint4 wv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = c_begin + lane + 32 * u;
    wv[u] = c < c_end ? ld_stream(wr + c * 8) : uint4{0, 0, 0, 0};
  }
  pdl_wait();
  pdl_launch_dependents();
  const T* xb = x;
  if constexpr (XS) {  // x's M rows into shared memory once per CTA
    T* xs = reinterpret_cast<T*>(gemv_smem);
    for (int i = threadIdx.x; i < M * nchunks; i += kWarpsPerCta * 32)
      cp_async16(xs + i * 8, x + i * 8, true);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    xb = xs;
  }
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
  for (int c0 = c_begin + lane; c0 < c_end; c0 += 32 * kUnroll) {
    uint4 nv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * (kUnroll + u);
      nv[u] = c < c_end ? ld_stream(wr + c * 8) : uint4{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c < c_end) {
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const uint4 xv =
              *reinterpret_cast<const uint4*>(xb + static_cast<int64_t>(m) * K + c * 8);
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
  if (S > 1) {  // the row's S slices, summed in slice order
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < M; ++m) red[warp][m] = acc[m];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      acc[m] = red[warp][m];
      for (int j = 1; j < S; ++j) acc[m] += red[warp + j][m];
    }
  }
  if (lane == 0 && live) {
    const float b = bias != nullptr ? to_f32(bias[n]) : 0.f;
#pragma unroll
    for (int m = 0; m < M; ++m) out[static_cast<int64_t>(m) * N + n] = from_f32<TO>(acc[m] + b);
  }
}

// Bench switches (docs/PERFORMANCE.md): PAGODA_GEMV_SPLIT=j forces 2^j warps
// a row; PAGODA_GEMV_XS=0 reads x from global memory (L1) instead of
// shared memory.
int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : dflt;
}

// Split-k: the fewest warps a row (1, 2, 4 or 8) that give the grid about
// 1.5 × 32 warps an SM, while each warp still streams at least two rounds
// of loads.
int split_log(int N, int K) {
  static const int forced = env_int("PAGODA_GEMV_SPLIT", -1);
  if (forced >= 0 && forced <= 3) return forced;
  static const int sms = [] {
    int dev = 0, v = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  const int64_t target = int64_t{48} * sms;
  int j = 0;
  while (j < 3 && (int64_t{N} << j) < target && (K / 8 >> (j + 1)) >= 2 * 32 * kUnroll) ++j;
  return j;
}

template <typename T, typename TO>
void launch_t(const void* x, const void* w, const void* bias, void* out, int M, int N, int K,
              cudaStream_t stream) {
  static const bool xs_on = env_int("PAGODA_GEMV_XS", 1) != 0;
  const int log_s = split_log(N, K);
  const int rows = kWarpsPerCta >> log_s;
  const dim3 grid((N + rows - 1) / rows), block(kWarpsPerCta * 32);
  const size_t xs = static_cast<size_t>(M) * K * sizeof(T);
  const bool use_xs = xs_on && M <= 2 && xs <= 48 * 1024;
  const T* xp = static_cast<const T*>(x);
  const T* wp = static_cast<const T*>(w);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  const auto go = [&](auto kernel, size_t smem) {
    launch_pdl(kernel, grid, block, smem, stream, xp, wp, bp, op, N, K, log_s);
  };
  switch (M) {
    case 1:
      use_xs ? go(gemv_kernel<T, TO, 1, true>, xs) : go(gemv_kernel<T, TO, 1, false>, 0);
      break;
    case 2:
      use_xs ? go(gemv_kernel<T, TO, 2, true>, xs) : go(gemv_kernel<T, TO, 2, false>, 0);
      break;
    case 3:
      go(gemv_kernel<T, TO, 3, false>, 0);
      break;
    case 4:
      go(gemv_kernel<T, TO, 4, false>, 0);
      break;
    case 5:
      go(gemv_kernel<T, TO, 5, false>, 0);
      break;
    case 6:
      go(gemv_kernel<T, TO, 6, false>, 0);
      break;
    case 7:
      go(gemv_kernel<T, TO, 7, false>, 0);
      break;
    default:
      go(gemv_kernel<T, TO, 8, false>, 0);
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
