// The mixture-of-experts MLP's kernels (launchers: gpu/moe_kernels.h), in
// the design of vLLM's fused_moe (csrc/moe/topk_softmax_kernels.cu,
// csrc/moe/moe_align_sum_kernels.cu, the Triton fused_moe_kernel of
// model_executor/layers/fused_moe/fused_moe.py) for Mixtral's sparse MoE
// block (Jiang et al. 2024, arXiv:2401.04088) and Qwen2-MoE's, with HF
// transformers' routing as engine/cpu/cpu_moe.cpp computes it:
//  * top-k softmax: one warp per token; the softmax in fp32 (max-subtracted),
//    then top_k rounds of a warp arg-max (ties to the lower expert id);
//  * align: one CTA of 32 warps; each warp owns a contiguous chunk of the
//    T*k slots and counts them per expert with __match_any_sync (no
//    atomics), the per-expert totals are padded to whole tiles and
//    prefix-summed, and a second pass over the same chunks scatters every
//    slot to its expert's range at (expert start + the counts of the warps
//    before + its rank in the warp), so each expert's slots stay in
//    ascending order: the layout, and every result after it, is
//    deterministic;
//  * grouped GEMM: one CTA per (tile of slots, 64 outputs); it reads its
//    tile's expert and gathers its rows of the input through sorted_ids
//    (vLLM's fused_moe_kernel); tiles past the used count return at once,
//    so the grid is sized for the worst case and fixed per T. bf16 / f16 run
//    on tensor cores: mma.sync.m16n8k16 with fp32 accumulation, ldmatrix
//    fragments from padded shared memory (row stride BK + 8 elements:
//    conflict-free), a 3-stage cp.async pipeline over k;
//  * combine: out[t] = Σ_j w[t, j] y[t*k + j] in fp32 in the CPU
//    backend's order, plus the shared expert sigmoid(x · g) · s(x).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/moe_kernels.h"
#include "gpu/moe_tile_args.h"
#include "gpu/ptx.cuh"

namespace pagoda::cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("moe kernels: " + what);
}

// ---- top-k softmax ---------------------------------------------------------

constexpr int kTopkWarps = 4;  // tokens per CTA

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Shared memory: kTopkWarps x E floats (each warp's token's probabilities;
// a chosen expert's entry becomes -1).
__global__ void __launch_bounds__(kTopkWarps * 32)
    moe_topk_softmax_kernel(const float* __restrict__ logits, int T, int E, int k, bool renormalize,
                            int32_t* __restrict__ topk_ids, float* __restrict__ topk_weights) {
  extern __shared__ float s_prob[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = blockIdx.x * kTopkWarps + warp;
  if (t >= T) return;  // whole warps only: no block-wide barrier below
  float* p = s_prob + warp * E;
  const float* l = logits + static_cast<int64_t>(t) * E;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) {
    const float v = l[e];
    p[e] = v;
    mx = fmaxf(mx, v);
  }
  mx = warp_max(mx);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) {
    const float v = expf(p[e] - mx);
    p[e] = v;
    sum += v;
  }
  sum = warp_sum(sum);
  for (int e = lane; e < E; e += 32) p[e] = p[e] / sum;
  __syncwarp();

  int32_t* ids = topk_ids + static_cast<int64_t>(t) * k;
  float* wts = topk_weights + static_cast<int64_t>(t) * k;
  float top_sum = 0.f;
  for (int j = 0; j < k; ++j) {
    // This lane's best untaken expert (ascending e: ties keep the lower id;
    // a NaN probability is still taken, so NaN logits give NaN weights).
    float best = 0.f;
    int bi = -1;
    for (int e = lane; e < E; e += 32) {
      const float v = p[e];
      if (v < 0.f) continue;  // chosen in an earlier round
      if (bi < 0 || v > best) {
        best = v;
        bi = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(kFull, best, o);
      const int oi = __shfl_xor_sync(kFull, bi, o);
      if (oi >= 0 && (bi < 0 || ob > best || (ob == best && oi < bi))) {
        best = ob;
        bi = oi;
      }
    }
    // Lane 0's choice for all (the butterfly agrees unless NaNs break the order).
    bi = __shfl_sync(kFull, bi, 0);
    best = __shfl_sync(kFull, best, 0);
    if (lane == 0) {
      p[bi] = -1.f;
      ids[j] = bi;
      wts[j] = best;
    }
    top_sum += best;  // the CPU backend's order: j = 0, 1, ...
    __syncwarp();
  }
  if (renormalize)
    for (int j = lane; j < k; j += 32) wts[j] = wts[j] / top_sum;
}

// ---- align -------------------------------------------------------------------

constexpr int kAlignWarps = 32;

// The slot's expert, or -1 for a slot past the chunk or an id outside [0, E).
__device__ __forceinline__ int slot_expert(const int32_t* ids, int i, int end, int E) {
  if (i >= end) return -1;
  const int e = ids[i];
  return e >= 0 && e < E ? e : -1;
}

// Shared memory: E + 1 ints (the experts' first padded slots, then the total).
// counts: [kAlignWarps][E] ints of scratch (each warp's row: its chunk's
// count per expert, then its next free slot per expert).
__global__ void __launch_bounds__(kAlignWarps * 32)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int n, int E, int BM, int max_tiles,
                     int32_t* __restrict__ sorted_ids, int32_t* __restrict__ tile_expert,
                     int32_t* __restrict__ num_tiles, int32_t* __restrict__ counts) {
  extern __shared__ int32_t s_off[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int nthreads = kAlignWarps * 32;
  const int64_t cap = static_cast<int64_t>(max_tiles) * BM;
  for (int64_t i = tid; i < cap; i += nthreads) sorted_ids[i] = n;
  for (int i = tid; i < max_tiles; i += nthreads) tile_expert[i] = -1;
  int32_t* mine = counts + static_cast<int64_t>(warp) * E;
  for (int e = lane; e < E; e += 32) mine[e] = 0;
  __syncwarp();

  const int chunk = (n + kAlignWarps - 1) / kAlignWarps;
  const int begin = min(n, warp * chunk), end = min(n, begin + chunk);
  // Pass 1: this warp's count per expert. Lanes of one expert in a group of
  // 32 slots are peers; the lowest adds them all.
  for (int base = begin; base < end; base += 32) {
    const int e = slot_expert(topk_ids, base + lane, end, E);
    const unsigned peers = __match_any_sync(kFull, e);
    if (e >= 0 && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
    __syncwarp();
  }
  __syncthreads();

  // Padded totals at s_off[e + 1], then an inclusive scan (warp 0, a chunk
  // of experts per lane) makes s_off[e] expert e's first slot.
  for (int e = tid; e < E; e += nthreads) {
    int c = 0;
    for (int w = 0; w < kAlignWarps; ++w) c += counts[w * E + e];
    s_off[e + 1] = (c + BM - 1) / BM * BM;
  }
  if (tid == 0) s_off[0] = 0;
  __syncthreads();
  if (warp == 0) {
    const int per = (E + 31) / 32;
    const int lo = 1 + lane * per, hi = min(E + 1, lo + per);
    int s = 0;
    for (int i = lo; i < hi; ++i) s += s_off[i];
    int inc = s;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(kFull, inc, o);
      if (lane >= o) inc += v;
    }
    int run = inc - s;
    for (int i = lo; i < hi; ++i) {
      run += s_off[i];
      s_off[i] = run;
    }
  }
  __syncthreads();
  if (tid == 0) *num_tiles = s_off[E] / BM;
  // Tiles of each expert; each warp's row becomes its first slot per expert.
  for (int e = tid; e < E; e += nthreads) {
    for (int tile = s_off[e] / BM; tile < s_off[e + 1] / BM; ++tile) tile_expert[tile] = e;
    int run = s_off[e];
    for (int w = 0; w < kAlignWarps; ++w) {
      const int c = counts[w * E + e];
      counts[w * E + e] = run;
      run += c;
    }
  }
  __syncthreads();

  // Pass 2: scatter in slot order (rank among the group's peers).
  const unsigned below = (1u << lane) - 1u;
  for (int base = begin; base < end; base += 32) {
    const int i = base + lane;
    const int e = slot_expert(topk_ids, i, end, E);
    const unsigned peers = __match_any_sync(kFull, e);
    if (e >= 0) sorted_ids[mine[e] + __popc(peers & below)] = i;
    __syncwarp();
    if (e >= 0 && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
    __syncwarp();
  }
}

// ---- grouped GEMM --------------------------------------------------------------

constexpr int kBN = 64;  // outputs per CTA (both kernels)

// The tile's rows: the input row each reads (-1: padding) and the output
// row it writes (the slot; -1: padding).
template <int BM>
__device__ __forceinline__ void load_tile_rows(const MoeTileArgs& a, int tile, int* arow,
                                               int* crow) {
  for (int i = threadIdx.x; i < BM; i += blockDim.x) {
    const int s = a.sorted_ids[static_cast<int64_t>(tile) * BM + i];
    const bool ok = s >= 0 && s < a.num_slots;
    arow[i] = ok ? s / a.a_div : -1;
    crow[i] = ok ? s : -1;
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

template <typename T>
__device__ __forceinline__ void store2(T* p, float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(lo, hi);
  } else {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(lo, hi);
  }
}

// Tensor-core tile shapes: BM slots x 64 outputs per CTA of 4 warps, k in
// steps of 32 through kStages shared-memory stages.
template <int BM>
struct MmaTile {
  static constexpr int kWarps = 4, kBK = 32, kStages = 3, kLds = kBK + 8;
  static constexpr int kWarpsM = BM == 16 ? 1 : 2, kWarpsN = kWarps / kWarpsM;
  static constexpr int kWarpM = BM / kWarpsM, kWarpN = kBN / kWarpsN;  // 16x16 or 32x32
  static constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;            // mma tiles per warp
  static_assert(kNI % 2 == 0, "B fragments are loaded two n-tiles at a time");
};

template <typename T, int BM>
__global__ void __launch_bounds__(MmaTile<BM>::kWarps * 32) moe_gemm_mma_kernel(MoeTileArgs a) {
  using C = MmaTile<BM>;
  constexpr int BK = C::kBK, LDS = C::kLds, S = C::kStages, CH = BK / 8;  // 16-byte chunks a row
  __shared__ __align__(16) T s_a[S][BM * LDS];
  __shared__ __align__(16) T s_b[S][kBN * LDS];
  __shared__ int s_arow[BM], s_crow[BM];

  const int tile = blockIdx.x;
  if (tile >= *a.num_tiles) return;
  const int expert = a.tile_expert[tile];
  const int n0 = blockIdx.y * kBN;
  const int N = a.N, K = a.K;
  load_tile_rows<BM>(a, tile, s_arow, s_crow);
  __syncthreads();

  const T* __restrict__ A = static_cast<const T*>(a.a);
  const T* __restrict__ W = static_cast<const T*>(a.w) + static_cast<int64_t>(expert) * N * K;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int ktiles = (K + BK - 1) / BK;

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    for (int c = tid; c < BM * CH; c += C::kWarps * 32) {
      const int r = c / CH, kc = (c % CH) * 8;
      const int row = s_arow[r];
      const bool ok = row >= 0 && k0 + kc < K;  // K % 8 == 0: a chunk is all in or all out
      cp_async16(&s_a[stage][r * LDS + kc], ok ? A + static_cast<int64_t>(row) * K + k0 + kc : A,
                 ok);
    }
    for (int c = tid; c < kBN * CH; c += C::kWarps * 32) {
      const int r = c / CH, kc = (c % CH) * 8;
      const int n = n0 + r;
      const bool ok = n < N && k0 + kc < K;
      cp_async16(&s_b[stage][r * LDS + kc], ok ? W + static_cast<int64_t>(n) * K + k0 + kc : W, ok);
    }
  };

  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNI; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<S - 2>();  // stage kt has landed (this thread's copies) ...
    __syncthreads();         // ... and everyone's; stage kt-1 is free again
    const int pf = kt + S - 1;
    if (pf < ktiles) load_stage(pf % S, pf);
    cp_async_commit();
    const T* As = s_a[kt % S];
    const T* Bs = s_b[kt % S];
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      // A fragments (PTX ISA "Matrix Fragments for mma.m16n8k16"): the four
      // 8x8 matrices (rows 0-7 / 8-15) x (k 0-7 / 8-15), lane l addressing
      // row l % 16, k (l / 16) * 8.
      uint32_t af[C::kMI][4];
#pragma unroll
      for (int mi = 0; mi < C::kMI; ++mi)
        ldmatrix_x4(af[mi],
                    As + (wm * C::kWarpM + mi * 16 + lane % 16) * LDS + kk + (lane / 16) * 8);
      // B fragments of two n-tiles at once: s_b holds w's rows (n) with k
      // contiguous, i.e. B (k x n) column-major as mma's .col wants; the
      // matrices are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
      // (n 8-15, k 8-15).
      uint32_t bf[C::kNI][2];
#pragma unroll
      for (int ni = 0; ni < C::kNI; ni += 2) {
        uint32_t r[4];
        const int nrow = wn * C::kWarpN + ni * 8 + (lane / 16) * 8 + lane % 8;
        ldmatrix_x4(r, Bs + nrow * LDS + kk + ((lane / 8) % 2) * 8);
        bf[ni][0] = r[0];
        bf[ni][1] = r[1];
        bf[ni + 1][0] = r[2];
        bf[ni + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < C::kNI; ++ni) mma16816<T>(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  cp_async_wait<0>();

  // Accumulator c of lane (g, t) = (lane / 4, lane % 4) in mma tile (mi,
  // ni): row 16 mi + g (+ 8 for c >= 2), column 8 ni + 2t (+ 1 for odd c).
  T* __restrict__ out = static_cast<T*>(a.out);
  const int g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = s_crow[wm * C::kWarpM + mi * 16 + g + 8 * h];
      if (row < 0) continue;
      T* orow = out + static_cast<int64_t>(row) * N;
#pragma unroll
      for (int ni = 0; ni < C::kNI; ++ni) {
        const int col = n0 + wn * C::kWarpN + ni * 8 + 2 * t4;
        const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        if (col + 1 < N && N % 2 == 0) {
          store2<T>(orow + col, v0, v1);
        } else {
          if (col < N) orow[col] = from_f32<T>(v0);
          if (col + 1 < N) orow[col + 1] = from_f32<T>(v1);
        }
      }
    }
}

// CUDA-core kernel (F32, and shapes the tensor-core one declines): 256
// threads as 16 x 16; thread (ty, tx) computes rows ty + 16 i and columns
// tx + 16 j of the BM x 64 tile; k in steps of 16 through shared memory.
template <typename T, int BM>
__global__ void __launch_bounds__(256) moe_gemm_simt_kernel(MoeTileArgs a) {
  constexpr int BK = 16, RM = BM / 16;
  __shared__ float s_a[BK][BM + 1];
  __shared__ float s_b[BK][kBN + 1];
  __shared__ int s_arow[BM], s_crow[BM];
  const int tile = blockIdx.x;
  if (tile >= *a.num_tiles) return;
  const int expert = a.tile_expert[tile];
  const int n0 = blockIdx.y * kBN;
  const int N = a.N, K = a.K;
  load_tile_rows<BM>(a, tile, s_arow, s_crow);
  __syncthreads();
  const T* __restrict__ A = static_cast<const T*>(a.a);
  const T* __restrict__ W = static_cast<const T*>(a.w) + static_cast<int64_t>(expert) * N * K;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float acc[RM][4];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int c = tid; c < BM * BK; c += 256) {
      const int r = c / BK, kk = c % BK;
      const int row = s_arow[r];
      s_a[kk][r] =
          row >= 0 && k0 + kk < K ? to_f32(A[static_cast<int64_t>(row) * K + k0 + kk]) : 0.f;
    }
    for (int c = tid; c < kBN * BK; c += 256) {
      const int r = c / BK, kk = c % BK;
      const int n = n0 + r;
      s_b[kk][r] = n < N && k0 + kk < K ? to_f32(W[static_cast<int64_t>(n) * K + k0 + kk]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk)
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float av = s_a[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av * s_b[kk][tx + 16 * j];
      }
    __syncthreads();
  }
  T* __restrict__ out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int row = s_crow[ty + 16 * i];
    if (row < 0) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx + 16 * j;
      if (col < N) out[static_cast<int64_t>(row) * N + col] = from_f32<T>(acc[i][j]);
    }
  }
}

// ---- combine -----------------------------------------------------------------

constexpr int kCombineThreads = 256;

__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < static_cast<int>(blockDim.x / 32) ? red[lane] : 0.f;
  return warp_sum(t);
}

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    moe_combine_kernel(const T* __restrict__ y, const float* __restrict__ topk_weights, int k,
                       const T* __restrict__ shared, const T* __restrict__ x,
                       const T* __restrict__ shared_gate, T* __restrict__ out, int64_t H) {
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  float gate = 0.f;
  if (shared != nullptr) {
    float d = 0.f;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
      d += to_f32(x[t * H + h]) * to_f32(shared_gate[h]);
    d = block_sum(d, red);
    gate = 1.f / (1.f + expf(-d));
  }
  const float* w = topk_weights + t * k;
  const T* yt = y + t * k * H;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < k; ++j) acc += w[j] * to_f32(yt[j * H + h]);
    if (shared != nullptr) acc += gate * to_f32(shared[t * H + h]);
    out[t * H + h] = from_f32<T>(acc);
  }
}

MoeTileArgs gemm_args(const void* a, int64_t a_div, const void* w, void* out,
                      const int32_t* sorted_ids, const int32_t* tile_expert,
                      const int32_t* num_tiles, int64_t max_tiles, int tile_rows, int64_t num_slots,
                      int64_t N, int64_t K) {
  if (tile_rows != 16 && tile_rows != 64) bad("tile_rows must be 16 or 64");
  const std::optional<MoeTileArgs> g = moe_tile_args(
      a, a_div, w, out, sorted_ids, tile_expert, num_tiles, max_tiles, tile_rows, num_slots, N, K);
  if (!g || max_tiles > 65535LL * 32768 || (N + kBN - 1) / kBN > 65535)
    bad("grouped GEMM of " + std::to_string(num_slots) + " slots, N " + std::to_string(N) + ", K " +
        std::to_string(K) + ", " + std::to_string(max_tiles) + " tiles of " +
        std::to_string(tile_rows) + " out of range");
  return *g;
}

template <typename T>
void launch_mma_t(const MoeTileArgs& g, int64_t max_tiles, int tile_rows, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((g.N + kBN - 1) / kBN));
  if (tile_rows == 16)
    moe_gemm_mma_kernel<T, 16><<<grid, MmaTile<16>::kWarps * 32, 0, stream>>>(g);
  else
    moe_gemm_mma_kernel<T, 64><<<grid, MmaTile<64>::kWarps * 32, 0, stream>>>(g);
  PAGODA_CUDA_CHECK_LAUNCH("moe_gemm_mma_kernel");
}

}  // namespace

int moe_tile_rows(int64_t num_tokens, int64_t num_experts, int64_t top_k) {
  // 64-row tiles once an expert averages 48 slots (at most a quarter padding).
  return num_experts > 0 && num_tokens * top_k >= 48 * num_experts ? 64 : 16;
}

int64_t moe_max_tiles(int64_t num_slots, int64_t num_experts, int tile_rows) {
  const int64_t busy = std::min(num_experts, num_slots);  // experts that can have a slot
  return std::min(num_slots, (num_slots + busy * (tile_rows - 1)) / tile_rows);
}

int64_t moe_align_scratch_ints(int64_t num_experts) { return kAlignWarps * num_experts; }

void launch_moe_topk_softmax(const float* logits, int64_t T, int64_t E, int64_t top_k,
                             bool renormalize, int32_t* topk_ids, float* topk_weights,
                             cudaStream_t stream) {
  if (E < 1 || E > kMoeMaxExperts || top_k < 1 || top_k > E || T < 0 || T > INT_MAX)
    bad("top-k softmax of " + std::to_string(T) + " tokens, top " + std::to_string(top_k) + " of " +
        std::to_string(E) + " experts (at most " + std::to_string(kMoeMaxExperts) + ")");
  if (T == 0) return;
  const auto blocks = static_cast<unsigned>((T + kTopkWarps - 1) / kTopkWarps);
  const size_t smem = static_cast<size_t>(kTopkWarps) * static_cast<size_t>(E) * sizeof(float);
  moe_topk_softmax_kernel<<<blocks, kTopkWarps * 32, smem, stream>>>(
      logits, static_cast<int>(T), static_cast<int>(E), static_cast<int>(top_k), renormalize,
      topk_ids, topk_weights);
  PAGODA_CUDA_CHECK_LAUNCH("moe_topk_softmax_kernel");
}

void launch_moe_align(const int32_t* topk_ids, int64_t num_slots, int64_t E, int tile_rows,
                      int64_t max_tiles, int32_t* sorted_ids, int32_t* tile_expert,
                      int32_t* num_tiles, int32_t* counts, cudaStream_t stream) {
  if (E < 1 || E > kMoeMaxExperts || tile_rows < 1 || num_slots < 0 || max_tiles < 0 ||
      max_tiles < moe_max_tiles(num_slots, E, tile_rows) || max_tiles * tile_rows > INT_MAX)
    bad("align of " + std::to_string(num_slots) + " slots over " + std::to_string(E) +
        " experts into " + std::to_string(max_tiles) + " tiles of " + std::to_string(tile_rows));
  const size_t smem = static_cast<size_t>(E + 1) * sizeof(int32_t);
  moe_align_kernel<<<1, kAlignWarps * 32, smem, stream>>>(
      topk_ids, static_cast<int>(num_slots), static_cast<int>(E), tile_rows,
      static_cast<int>(max_tiles), sorted_ids, tile_expert, num_tiles, counts);
  PAGODA_CUDA_CHECK_LAUNCH("moe_align_kernel");
}

bool launch_moe_gemm_mma(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                         const int32_t* sorted_ids, const int32_t* tile_expert,
                         const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                         int64_t num_slots, int64_t N, int64_t K, cudaStream_t stream) {
  if ((dt != DType::BF16 && dt != DType::F16) || K % 8 != 0 || !aligned16(a) || !aligned16(w))
    return false;
  const MoeTileArgs g = gemm_args(a, a_div, w, out, sorted_ids, tile_expert, num_tiles, max_tiles,
                                  tile_rows, num_slots, N, K);
  if (max_tiles == 0) return true;
  if (dt == DType::BF16)
    launch_mma_t<__nv_bfloat16>(g, max_tiles, tile_rows, stream);
  else
    launch_mma_t<__half>(g, max_tiles, tile_rows, stream);
  return true;
}

void launch_moe_gemm(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                     const int32_t* sorted_ids, const int32_t* tile_expert,
                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows, int64_t num_slots,
                     int64_t N, int64_t K, cudaStream_t stream) {
  if (launch_moe_gemm_mma(dt, a, a_div, w, out, sorted_ids, tile_expert, num_tiles, max_tiles,
                          tile_rows, num_slots, N, K, stream))
    return;
  const MoeTileArgs g = gemm_args(a, a_div, w, out, sorted_ids, tile_expert, num_tiles, max_tiles,
                                  tile_rows, num_slots, N, K);
  if (max_tiles == 0) return;
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((N + kBN - 1) / kBN));
  PAGODA_DISPATCH_FLOAT(dt, "moe_gemm", {
    if (tile_rows == 16)
      moe_gemm_simt_kernel<scalar_t, 16><<<grid, 256, 0, stream>>>(g);
    else
      moe_gemm_simt_kernel<scalar_t, 64><<<grid, 256, 0, stream>>>(g);
  });
  PAGODA_CUDA_CHECK_LAUNCH("moe_gemm_simt_kernel");
}

void launch_moe_combine(DType dt, const void* y, const float* topk_weights, int64_t top_k,
                        const void* shared, const void* x, const void* shared_gate, void* out,
                        int64_t T, int64_t H, cudaStream_t stream) {
  if (T < 0 || T > INT_MAX || H < 1 || top_k < 1 || top_k > kMoeMaxExperts)
    bad("combine of " + std::to_string(T) + " tokens x " + std::to_string(H) + ", top " +
        std::to_string(top_k));
  if (T == 0) return;
  PAGODA_DISPATCH_FLOAT(
      dt, "moe_combine",
      moe_combine_kernel<scalar_t><<<static_cast<unsigned>(T), kCombineThreads, 0, stream>>>(
          static_cast<const scalar_t*>(y), topk_weights, static_cast<int>(top_k),
          static_cast<const scalar_t*>(shared), static_cast<const scalar_t*>(x),
          static_cast<const scalar_t*>(shared_gate), static_cast<scalar_t*>(out), H));
  PAGODA_CUDA_CHECK_LAUNCH("moe_combine_kernel");
}

}  // namespace pagoda::cuda
