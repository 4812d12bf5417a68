// Skinny GEMM on tensor cores for decode-sized batches (issue 14): out[M, N]
// = x[M, K] · w[N, K]ᵀ (+ bias[N]) for 1 <= M <= 64, memory-bound on the
// weight stream, which is read once. The "swap AB" arrangement of
// TensorRT-LLM's and vLLM's small-M kernels: w's rows are the MMA's M side
// (16 output columns per tile), x's rows its N side (8 batch rows per
// group), so one mma.sync.m16n8k16 consumes 16 weight rows and serves up to
// 8 batch rows, and MB = ceil(M / 8) groups share each weight fragment.
//
// The dot product is over k, so A and B may use any common permutation of
// k: thread (g = lane / 4, t = lane % 4) loads 16 contiguous bytes (8
// elements at k0 + 8t) of weight rows g and g + 8 and of batch row g, and
// those registers are, unchanged, the A and B fragments of two MMAs (the
// PTX ISA's "Matrix Fragments for mma.m16n8k16": A's {row g, cols 2t, 2t+1}
// takes elements 0-1, {row g+8, ...} the other row's 0-1, {row g, cols
// 2t+8, 2t+9} elements 2-3, and so on; B likewise). No shuffles, no shared
// memory in the loop: each warp streams its share of k, 32 elements per
// step, U steps of loads in flight, read-only non-allocating loads for w.
// The CTA's warps split k (interleaved 32-element steps, so together they
// read contiguous 512-byte runs of each row) and reduce through shared
// memory at the end; fp32 accumulation throughout.
// Up to 16 rows the streaming form below (skinny_stream_kernel) runs
// instead: the same fragments, software-pipelined. Measured on the H200
// (pagoda_gpu_bench --only skinny, graph-timed; docs/PERFORMANCE.md,
// seventeenth session) against this kernel: Llama-2-7B's o_proj 2,900
// against 2,460 GB/s at M = 1-8, down_proj 3,600 against 2,760;
// LtGemm::auto_kernel says where it runs. This unpipelined form serves 17-64
// rows when forced (tests, benchmarks); PAGODA_SKINNY=legacy takes it for
// every M.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"
#include "gpu/ptx.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;  // split-k warps per CTA

// Lane (g, t)'s pointers into x: batch row 8i + g at k = 8t, for the MB
// groups of 8 rows; rows past M point at row 0 and are masked (ok false).
template <typename T, int MB>
__device__ __forceinline__ void batch_rows(const T* x, int M, int K, int g, int t, const T* (&row)[MB],
                                           bool (&ok)[MB]) {
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    const int m = 8 * i + g;
    ok[i] = m < M;
    row[i] = x + static_cast<int64_t>(ok[i] ? m : 0) * K + 8 * t;
  }
}

// Sums the warps' partials (red[warp][r][lane], r = (j * MB + i) * 4 + c)
// in fixed order and stores them (+ bias): accumulator c of lane (g, t) in
// tile j, group i is output column n0 + 16j + g (+ 8 for c >= 2), batch row
// 8i + 2t (+ 1 for odd c). After a __syncthreads().
template <typename T, typename TO, int NT, int MB>
__device__ __forceinline__ void reduce_store(const float (&red)[kWarps][NT * MB * 4][32],
                                             const T* __restrict__ bias, TO* __restrict__ out, int M,
                                             int N, int n0) {
  for (int e = threadIdx.x; e < NT * MB * 4 * 32; e += kWarps * 32) {
    const int l = e % 32, r = e / 32;
    const int c = r % 4, i = (r / 4) % MB, j = r / (4 * MB);
    const int n = n0 + 16 * j + l / 4 + (c >= 2 ? 8 : 0);
    const int m = 8 * i + 2 * (l % 4) + (c & 1);
    if (n >= N || m >= M) continue;
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) v += red[q][r][l];
    if (bias != nullptr) v += to_f32(bias[n]);
    out[static_cast<int64_t>(m) * N + n] = from_f32<TO>(v);
  }
}

// NT 16-column tiles of w per CTA, MB groups of 8 batch rows; kUnroll
// 32-element k steps of loads in flight per warp (fewer for wide batches:
// registers).
template <typename T, typename TO, int NT, int MB, int kUnroll = (MB <= 2 ? 4 : 2)>
__global__ void __launch_bounds__(kWarps * 32)
skinny_gemm_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                   TO* __restrict__ out, int M, int N, int K) {
  __shared__ float red[kWarps][NT * MB * 4][32];
  pdl_wait_then_release();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * (16 * NT);
  const int steps = K / 32;

  const T* wrow[NT][2];
  bool wok[NT][2];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + 16 * j + g + 8 * h;
      wok[j][h] = n < N;
      wrow[j][h] = w + static_cast<int64_t>(wok[j][h] ? n : 0) * K + 8 * t;
    }
  const T* xrow[MB];
  bool xok[MB];
  batch_rows<T, MB>(x, M, K, g, t, xrow, xok);

  float acc[NT][MB][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][i][c] = 0.f;

  const uint4 zero{0, 0, 0, 0};
  for (int s0 = warp; s0 < steps; s0 += kWarps * kUnroll) {
    uint4 wv[kUnroll][NT][2];
    uint4 xv[kUnroll][MB];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = s0 + kWarps * u;
      const bool in = s < steps;
      const int64_t off = static_cast<int64_t>(s) * 32;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[u][j][h] = in && wok[j][h] ? ld_stream(wrow[j][h] + off) : zero;
#pragma unroll
      for (int i = 0; i < MB; ++i)
        xv[u][i] = in && xok[i] ? __ldg(reinterpret_cast<const uint4*>(xrow[i] + off)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint32_t a_lo[4] = {wv[u][j][0].x, wv[u][j][1].x, wv[u][j][0].y, wv[u][j][1].y};
        const uint32_t a_hi[4] = {wv[u][j][0].z, wv[u][j][1].z, wv[u][j][0].w, wv[u][j][1].w};
#pragma unroll
        for (int i = 0; i < MB; ++i) {
          mma16816<T>(acc[j][i], a_lo, xv[u][i].x, xv[u][i].y);
          mma16816<T>(acc[j][i], a_hi, xv[u][i].z, xv[u][i].w);
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[warp][(j * MB + i) * 4 + c][lane] = acc[j][i][c];
  __syncthreads();
  reduce_store<T, TO, NT, MB>(red, bias, out, M, N, n0);
}

// The streaming form (issue 14, seventeenth session): the same fragments
// and k split, but the loop is software-pipelined as the GEMV is: the warp's
// first round of weights is loaded before the programmatic-launch wait (w
// does not depend on the previous kernel), and each iteration issues the
// next round's weight loads before it multiplies the current round, so a
// warp always has a round of loads in flight. One 16-column tile a CTA and
// at most 16 batch rows (MB <= 2) keep it at 128 registers, two CTAs an SM.
template <typename T, typename TO, int MB, int U>
__global__ void __launch_bounds__(kWarps * 32, 2)
    skinny_stream_kernel(const T* __restrict__ x, const T* __restrict__ w,
                         const T* __restrict__ bias, TO* __restrict__ out, int M, int N, int K) {
  __shared__ float red[kWarps][MB * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * 16;
  const int steps = K / 32;

  const T* wrow[2];
  bool wok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int n = n0 + g + 8 * h;
    wok[h] = n < N;
    wrow[h] = w + static_cast<int64_t>(wok[h] ? n : 0) * K + 8 * t;
  }
  const uint4 zero{0, 0, 0, 0};
  const auto load_round = [&](uint4(&wv)[U][2], int s0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + kWarps * u;
      const int64_t off = static_cast<int64_t>(s) * 32;
#pragma unroll
      for (int h = 0; h < 2; ++h) wv[u][h] = s < steps && wok[h] ? ld_stream(wrow[h] + off) : zero;
    }
  };
  uint4 cur[U][2];
  load_round(cur, warp);
  pdl_wait_then_release();

  const T* xrow[MB];
  bool xok[MB];
  batch_rows<T, MB>(x, M, K, g, t, xrow, xok);
  float acc[MB][4];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.f;

  for (int s0 = warp; s0 < steps; s0 += kWarps * U) {
    uint4 nxt[U][2];
    load_round(nxt, s0 + kWarps * U);
    uint4 xv[U][MB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + kWarps * u;
      const int64_t off = static_cast<int64_t>(s) * 32;
#pragma unroll
      for (int i = 0; i < MB; ++i)
        xv[u][i] =
            s < steps && xok[i] ? __ldg(reinterpret_cast<const uint4*>(xrow[i] + off)) : zero;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t a_lo[4] = {cur[u][0].x, cur[u][1].x, cur[u][0].y, cur[u][1].y};
      const uint32_t a_hi[4] = {cur[u][0].z, cur[u][1].z, cur[u][0].w, cur[u][1].w};
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        mma16816<T>(acc[i], a_lo, xv[u][i].x, xv[u][i].y);
        mma16816<T>(acc[i], a_hi, xv[u][i].z, xv[u][i].w);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) cur[u][h] = nxt[u][h];
    }
  }

#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][i * 4 + c][lane] = acc[i][c];
  __syncthreads();
  reduce_store<T, TO, 1, MB>(red, bias, out, M, N, n0);
}

template <typename T, typename TO, int NT>
void launch_nt(const void* x, const void* w, const void* bias, void* out, int M, int N, int K,
               cudaStream_t stream) {
  const dim3 grid((N + 16 * NT - 1) / (16 * NT)), block(kWarps * 32);
  const T* xp = static_cast<const T*>(x);
  const T* wp = static_cast<const T*>(w);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  const int groups = (M + 7) / 8;
  const auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, block, 0, stream, xp, wp, bp, op, M, N, K);
  };
  if (groups == 1)
    go(skinny_gemm_kernel<T, TO, NT, 1>);
  else if (groups == 2)
    go(skinny_gemm_kernel<T, TO, NT, 2>);
  else if (groups == 3)
    go(skinny_gemm_kernel<T, TO, NT, 3>);
  else if (groups == 4)
    go(skinny_gemm_kernel<T, TO, NT, 4>);
  else if constexpr (NT == 1) {  // shared memory: NT * MB <= 8 (32 KB)
    if (groups <= 6)
      go(skinny_gemm_kernel<T, TO, 1, 6>);
    else
      go(skinny_gemm_kernel<T, TO, 1, 8>);
  }
  PAGODA_CUDA_CHECK_LAUNCH("skinny_gemm_kernel");
}

template <typename T, typename TO>
void launch_t(const void* x, const void* w, const void* bias, void* out, int M, int N, int K,
              cudaStream_t stream) {
  // The streaming form up to 16 rows (PAGODA_SKINNY=legacy: the unpipelined
  // kernel below, for benchmarks).
  static const bool legacy = bench_switch("PAGODA_SKINNY") == "legacy";
  if (!legacy && M <= 16) {
    const dim3 grid((N + 15) / 16), block(kWarps * 32);
    const T* xp = static_cast<const T*>(x);
    const T* wp = static_cast<const T*>(w);
    const T* bp = static_cast<const T*>(bias);
    TO* op = static_cast<TO*>(out);
    if (M <= 8)
      launch_pdl(skinny_stream_kernel<T, TO, 1, 4>, grid, block, 0, stream, xp, wp, bp, op, M, N,
                 K);
    else
      launch_pdl(skinny_stream_kernel<T, TO, 2, 4>, grid, block, 0, stream, xp, wp, bp, op, M, N,
                 K);
    PAGODA_CUDA_CHECK_LAUNCH("skinny_stream_kernel");
    return;
  }
  // Two tiles a CTA where that still gives every SM a few CTAs (N >=
  // 8192: 256+ CTAs); one otherwise (o_proj / down_proj's N = 4096: 256).
  if (N >= 8192 && M <= 32) launch_nt<T, TO, 2>(x, w, bias, out, M, N, K, stream);  // M <= 32 only
  else launch_nt<T, TO, 1>(x, w, bias, out, M, N, K, stream);
}

}  // namespace

bool launch_skinny_gemm(DType in_dt, DType out_dt, const void* x, const void* w, const void* bias,
                        void* out, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  if (M < 1 || M > kSkinnyGemmMaxRows || K % 32 != 0 || K == 0 || K > (int64_t(1) << 30) || N < 1 ||
      N > (int64_t(1) << 30) || !aligned16(x) || !aligned16(w))
    return false;
  return dispatch_half_in(in_dt, out_dt, [&](auto t, auto to) {
    launch_t<typename decltype(t)::type, typename decltype(to)::type>(
        x, w, bias, out, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), stream);
  });
}

}  // namespace pagoda::cuda
