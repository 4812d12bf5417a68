// Kernels of the packed int4 / int8 linears (gpu/quant_kernels.h, layout
// engine/quant/packed_linear.h).
//
// qgemv_kernel, for decode batches (M <= 8 rows of x), meant to be bound by
// the packed weight stream as gemv.cu is for bf16 weights. One warp per
// kRows = 4 output features streams their rows of K*bits/32 words in
// 16-byte read-only non-allocating loads (kUnroll per row in flight per
// lane; the next batch is issued before the current one is used, the first
// before x is staged). A 16-byte chunk holds 128/bits consecutive input
// positions of one group (packed_linear.h), so the chunk's scale s and zero
// z are read once and the chunk contributes s · (Σ q_j·x_j − z · Σ x_j) to
// each row's fp32 sum (the weights s·(q_j − z) are never formed). The CTA
// stages x (K tiles of 48 KB) in shared memory as fp32, pre-scaled for the
// codes' in-place float conversion below, with each chunk's Σ x, so a code
// costs one LOP3, one FADD and one FFMA: on the H200 that is ~3 issue slots
// per code, which caps this fp32 form near 1.3 TB/s of int4 weights
// (measured, docs/PERFORMANCE.md); tensor-core fragments with half2
// dequantization (Marlin) are the way past it.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/ptx.cuh"
#include "gpu/quant_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 2;

// x staged in shared memory as fp32, pre-scaled so that a code can be
// turned into a float with one LOP3 and one FADD: a word's positions 0..3
// come from its low half, 4..7 from its high half (`w >> 16`); position j of
// a half is read in place as float(0x4B000000 | (half & (mask << b·j))) −
// 2^23 = q · 2^(b·j) exactly, so x at that position is stored times
// 2^(−b·j) (exact: a power of two) and the product is q · x exactly as
// rounded in fp32. b = 4 (int4: 4 positions per half) or 8 (int8: 2).
// Layout per K tile: xs[m][p][c] float4 (p: the chunk's float4 slot, c: the
// chunk), so a warp whose lanes read consecutive chunks reads consecutive
// float4s (no bank conflicts); sums[m][c] = Σ x over the chunk (unscaled).
constexpr int kSmemBytes = 48 * 1024;

template <int BITS>
__host__ __device__ constexpr int chunk_values() { return 128 / BITS; }

template <int M, int BITS>
__host__ __device__ constexpr int tile_chunks() {
  return kSmemBytes / (M * (chunk_values<BITS>() * 4 + 4));
}

constexpr int kRows = 4;  // output features per warp: each x value read from
                          // shared memory serves kRows weights

template <typename T, typename TO, int M, int BITS>
__global__ void __launch_bounds__(kWarps * 32)
    qgemv_kernel(const T* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const float* __restrict__ scales, const uint8_t* __restrict__ zeros,
                 const int32_t* __restrict__ chunk_group, const T* __restrict__ bias,
                 TO* __restrict__ out, int64_t ldo, int N, int K, int G) {
  constexpr int kChunk = chunk_values<BITS>();  // positions per 16-byte load
  constexpr int kF4 = kChunk / 4;               // float4 slots per chunk
  constexpr int kHalf = 16 / BITS;              // positions per 16-bit half
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  constexpr int kTile = tile_chunks<M, BITS>();
  __shared__ float4 xs[M * kF4 * kTile];
  __shared__ float sums[M * kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = (blockIdx.x * kWarps + warp) * kRows;
  const int nchunks = K / kChunk;
  const int64_t words = static_cast<int64_t>(K) * BITS / 32;
  const uint4* row[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    row[r] = reinterpret_cast<const uint4*>(qweight + static_cast<int64_t>(min(n0 + r, N - 1)) * words);
  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;
  uint4 wv[kUnroll][kRows], nx[kUnroll][kRows];
  // Loads the kUnroll chunks c, c + 32, ... of every row (beyond `end`: zero).
  auto load = [&](uint4 (&dst)[kUnroll][kRows], int c, int end) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        dst[u][r] = c + 32 * u < end ? ld_stream(row[r] + c + 32 * u) : uint4{0, 0, 0, 0};
  };
  for (int t0 = 0; t0 < nchunks; t0 += kTile) {
    const int tc = min(kTile, nchunks - t0);
    load(wv, t0 + lane, t0 + tc);  // in flight while x is staged
    __syncthreads();               // the previous tile is read
    for (int item = threadIdx.x; item < M * tc; item += blockDim.x) {
      const int m = item / tc, c = item % tc;
      const T* src = x + static_cast<int64_t>(m) * K + static_cast<int64_t>(t0 + c) * kChunk;
      float sum = 0.f;
#pragma unroll
      for (int p = 0; p < kF4; ++p) {
        float v[4];
        load_f32<T, 4>(src + 4 * p, v);
        float4 o;
        float* op = reinterpret_cast<float*>(&o);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          sum += v[j];
          const int pos = (4 * p + j) % kHalf;  // position within its 16-bit half
          op[j] = v[j] * __int_as_float((127 - BITS * pos) << 23);
        }
        xs[(m * kF4 + p) * kTile + c] = o;
      }
      sums[m * kTile + c] = sum;
    }
    __syncthreads();
    if (n0 >= N) continue;
    for (int c0 = lane; c0 < tc; c0 += 32 * kUnroll) {
      load(nx, t0 + c0 + 32 * kUnroll, t0 + tc);  // the next batch, in flight
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c >= tc) continue;
        float s[kRows], z[kRows];
        const int g = chunk_group[t0 + c];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int64_t at = static_cast<int64_t>(min(n0 + r, N - 1)) * G + g;
          s[r] = scales[at];
          z[r] = static_cast<float>(zeros[at]);
        }
        float dot[M][kRows];
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int r = 0; r < kRows; ++r) dot[m][r] = 0.f;
#pragma unroll
        for (int h = 0; h < 8; ++h) {  // the chunk's 16-bit halves, kHalf positions each
          float q[kRows][kHalf];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const uint32_t* w4 = reinterpret_cast<const uint32_t*>(&wv[u][r]);
            const uint32_t half = h % 2 == 0 ? w4[h / 2] : w4[h / 2] >> 16;
#pragma unroll
            for (int j = 0; j < kHalf; ++j)
              q[r][j] = __int_as_float(0x4B000000u | (half & (kMask << (BITS * j)))) - 8388608.f;
          }
#pragma unroll
          for (int m = 0; m < M; ++m) {
#pragma unroll
            for (int j = 0; j < kHalf; ++j) {
              const int pos = h * kHalf + j;  // position in the chunk
              const float4 xv = xs[(m * kF4 + pos / 4) * kTile + c];
              const float xj = reinterpret_cast<const float*>(&xv)[pos % 4];
#pragma unroll
              for (int r = 0; r < kRows; ++r) dot[m][r] = fmaf(q[r][j], xj, dot[m][r]);
            }
          }
        }
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const float sx = sums[m * kTile + c];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[m][r] = fmaf(s[r], dot[m][r] - z[r] * sx, acc[m][r]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[u][r] = nx[u][r];
    }
  }
  if (n0 >= N) return;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], o);
  if (lane < kRows && n0 + lane < N) {
    const int n = n0 + lane;
    const float b = bias != nullptr ? to_f32(bias[n]) : 0.f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float a = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) a = r == lane ? acc[m][r] : a;
      out[static_cast<int64_t>(m) * ldo + n] = from_f32<TO>(a + b);
    }
  }
}

template <typename T, typename TO, int BITS>
void qgemv_t(const void* x, const uint32_t* qw, const float* s, const uint8_t* z, const int32_t* cg,
             const void* bias, void* out, int64_t ldo, int M, int N, int K, int G, cudaStream_t st) {
  const dim3 grid((N + kWarps * kRows - 1) / (kWarps * kRows)), block(kWarps * 32);
  const T* xp = static_cast<const T*>(x);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
#define PAGODA_QGEMV(MM) \
  qgemv_kernel<T, TO, MM, BITS><<<grid, block, 0, st>>>(xp, qw, s, z, cg, bp, op, ldo, N, K, G)
  switch (M) {
    case 1: PAGODA_QGEMV(1); break;
    case 2: PAGODA_QGEMV(2); break;
    case 3: PAGODA_QGEMV(3); break;
    case 4: PAGODA_QGEMV(4); break;
    case 5: PAGODA_QGEMV(5); break;
    case 6: PAGODA_QGEMV(6); break;
    case 7: PAGODA_QGEMV(7); break;
    default: PAGODA_QGEMV(8); break;
  }
#undef PAGODA_QGEMV
  PAGODA_CUDA_CHECK_LAUNCH("qgemv_kernel");
}

// ---- 4-bit codes in the tensor-core layout (packed_linear.h, tile_int4) ----
//
// qmma_kernel, for up to 8 * NT rows of x (decode batches up to 32): each
// CTA owns one tile of 16 output features; its 8 warps split the input
// positions (contiguous runs of 16-byte loads of four 16-position tiles,
// kMmaUnroll in flight with their scales and zeros).
// A lane's word of a tile is its A fragment of mma.m16n8k16: four LOP3s
// (0x000F000F | magic, after shifts of 4, 8, 12) give the four registers as
// (magic + q) pairs, one HSUB2 each subtracts (magic + zero) exactly, so A
// holds q − zero exactly in fp16 / bf16 and an fp32 accumulator gets
// Σ (q − zero)·x over a 32-position chunk (one group), which the row's scale
// then multiplies into the sum. B (x, n = the batch row) is read
// from L1/L2 as two 32-bit loads per tile. The weights are never rounded:
// only x and the output are in fp16 / bf16. The warps' sums meet in shared
// memory. Marlin (Frantar et al. 2024) does the same dequantization into
// fragments, with asynchronous copies and larger tiles for big batches.
constexpr int kMmaWarps = 8;
constexpr int kMmaUnroll = 4;

__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));  // (a & b) | c
  return r;
}

template <typename T>
struct Int4Magic;
template <>
struct Int4Magic<__half> {
  static constexpr uint32_t kWord = 0x64006400u;  // 1024.0 in each half: 1024 + q exactly
  static constexpr float kBase = 1024.f;
  __device__ static uint32_t sub(uint32_t a, uint32_t b) {
    const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  __device__ static uint32_t pair(float v) {
    const __half2 r = __float2half2_rn(v);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};
template <>
struct Int4Magic<__nv_bfloat16> {
  static constexpr uint32_t kWord = 0x43004300u;  // 128.0 in each bf16: 128 + q exactly
  static constexpr float kBase = 128.f;
  __device__ static uint32_t sub(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r =
        __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  __device__ static uint32_t pair(float v) {
    const __nv_bfloat162 r = __float2bfloat162_rn(v);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

template <typename T, typename TO, int NT>
__global__ void __launch_bounds__(kMmaWarps * 32)
    qmma_kernel(const T* __restrict__ x, const uint4* __restrict__ tiles, const float* __restrict__ scales,
                const uint8_t* __restrict__ zeros, const int32_t* __restrict__ chunk_group, int group_size,
                const T* __restrict__ bias, TO* __restrict__ out, int64_t ldo, int M, int K, int G) {
  using Mg = Int4Magic<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ngroups = K / 64;  // 16-byte loads per lane per row tile
  // Each warp takes a contiguous run of them (its groups change rarely).
  const int per = (ngroups + kMmaWarps - 1) / kMmaWarps;
  const int kb0 = warp * per, kb1 = min(ngroups, kb0 + per);
  const uint4* base = tiles + static_cast<int64_t>(blockIdx.x) * ngroups * 32 + lane;
  const int r0 = blockIdx.x * 16 + lane / 4, r8 = r0 + 8;
  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
  for (int kb = kb0; kb < kb1; kb += kMmaUnroll) {
    // Every load of the batch first: codes, then each 32-position chunk's
    // scales and zeros (group from group_size, or chunk_group with act-order).
    uint4 wv[kMmaUnroll];
    float s[kMmaUnroll][2][2];
    uint32_t z[kMmaUnroll][2][2];
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u) {
      const int kg = kb + u;
      wv[u] = kg < kb1 ? ld_stream(base + static_cast<int64_t>(kg) * 32) : uint4{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int chunk = min(kb + u, kb1 - 1) * 2 + c;
        const int g = group_size > 0 ? chunk * 32 / group_size : chunk_group[chunk];
        s[u][c][0] = scales[static_cast<int64_t>(r0) * G + g];
        s[u][c][1] = scales[static_cast<int64_t>(r8) * G + g];
        z[u][c][0] = zeros[static_cast<int64_t>(r0) * G + g];
        z[u][c][1] = zeros[static_cast<int64_t>(r8) * G + g];
      }
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u) {
      const int kg = kb + u;
      if (kg >= kb1) break;
      const uint32_t words[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
#pragma unroll
      for (int c = 0; c < 2; ++c) {  // a chunk: two 16-position tiles of one group
        const uint32_t z0 = Mg::pair(Mg::kBase + static_cast<float>(z[u][c][0]));
        const uint32_t z8 = Mg::pair(Mg::kBase + static_cast<float>(z[u][c][1]));
        float part[NT][4];
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) part[t][i] = 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int kk = 2 * c + h;
          const int k0 = (kg * 4 + kk) * 16;
          uint32_t b[NT][2];
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            const int m = t * 8 + lane / 4;
            b[t][0] = b[t][1] = 0;
            if (m < M) {
              const T* xr = x + static_cast<int64_t>(m) * K + k0 + 2 * (lane % 4);
              b[t][0] = *reinterpret_cast<const uint32_t*>(xr);
              b[t][1] = *reinterpret_cast<const uint32_t*>(xr + 8);
            }
          }
          const uint32_t w = words[kk];
          uint32_t a[4];
          a[0] = Mg::sub(and_or(w, 0x000F000Fu, Mg::kWord), z0);        // row r0, positions 2c', 2c'+1
          a[1] = Mg::sub(and_or(w >> 4, 0x000F000Fu, Mg::kWord), z8);   // row r8
          a[2] = Mg::sub(and_or(w >> 8, 0x000F000Fu, Mg::kWord), z0);   // row r0, positions + 8
          a[3] = Mg::sub(and_or(w >> 12, 0x000F000Fu, Mg::kWord), z8);  // row r8, positions + 8
#pragma unroll
          for (int t = 0; t < NT; ++t) mma16816<T>(part[t], a, b[t][0], b[t][1]);
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          acc[t][0] = fmaf(s[u][c][0], part[t][0], acc[t][0]);
          acc[t][1] = fmaf(s[u][c][0], part[t][1], acc[t][1]);
          acc[t][2] = fmaf(s[u][c][1], part[t][2], acc[t][2]);
          acc[t][3] = fmaf(s[u][c][1], part[t][3], acc[t][3]);
        }
      }
    }
  }
  __shared__ float red[kMmaWarps][NT * 4][32];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][t * 4 + i][lane] = acc[t][i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) v += red[w][t * 4 + i][lane];
      const int row = i < 2 ? r0 : r8;  // C fragment: c0, c1 row r0; c2, c3 row r8
      const int m = t * 8 + 2 * (lane % 4) + (i % 2);
      if (m < M) out[static_cast<int64_t>(m) * ldo + row] = from_f32<TO>(v + (bias ? to_f32(bias[row]) : 0.f));
    }
}

template <typename T, typename TO>
void qmma_t(const void* x, const uint32_t* qw, const float* s, const uint8_t* z, const int32_t* cg, int gs,
            const void* bias, void* out, int64_t ldo, int M, int N, int K, int G, cudaStream_t st) {
  const dim3 grid(N / 16), block(kMmaWarps * 32);
  const T* xp = static_cast<const T*>(x);
  const auto* tp = reinterpret_cast<const uint4*>(qw);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  switch ((M + 7) / 8) {
    case 1: qmma_kernel<T, TO, 1><<<grid, block, 0, st>>>(xp, tp, s, z, cg, gs, bp, op, ldo, M, K, G); break;
    case 2: qmma_kernel<T, TO, 2><<<grid, block, 0, st>>>(xp, tp, s, z, cg, gs, bp, op, ldo, M, K, G); break;
    case 3: qmma_kernel<T, TO, 3><<<grid, block, 0, st>>>(xp, tp, s, z, cg, gs, bp, op, ldo, M, K, G); break;
    default: qmma_kernel<T, TO, 4><<<grid, block, 0, st>>>(xp, tp, s, z, cg, gs, bp, op, ldo, M, K, G); break;
  }
  PAGODA_CUDA_CHECK_LAUNCH("qmma_kernel");
}

// The tiled codes of N rows dequantized into w [N, K] (original input order
// through perm): one thread per lane word.
template <typename T>
__global__ void qdequant_tiled_kernel(const uint32_t* __restrict__ tiles, const float* __restrict__ scales,
                                      const uint8_t* __restrict__ zeros, const int32_t* __restrict__ chunk_group,
                                      const int32_t* __restrict__ perm, T* __restrict__ w, int N, int K, int G) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // word index
  if (idx >= static_cast<int64_t>(N) * K / 8) return;
  const int kt4 = static_cast<int>(idx % 4);
  const int lane = static_cast<int>((idx / 4) % 32);
  const int64_t rest = idx / 128;  // row tile * (K / 64) + position group
  const int ngroups = K / 64;
  const int rt = static_cast<int>(rest / ngroups), kg = static_cast<int>(rest % ngroups);
  const int kt = kg * 4 + kt4;
  const uint32_t word = tiles[idx];
#pragma unroll
  for (int nib = 0; nib < 8; ++nib) {
    const int p = nib % 4, h = nib / 4;  // register p, half h
    const int row = rt * 16 + lane / 4 + 8 * (p % 2);
    const int j = kt * 16 + 2 * (lane % 4) + 8 * (p / 2) + h;
    const int g = chunk_group[j / 32];
    const float v = scales[static_cast<int64_t>(row) * G + g] *
                    static_cast<float>(static_cast<int>((word >> (4 * nib)) & 15u) -
                                       static_cast<int>(zeros[static_cast<int64_t>(row) * G + g]));
    w[static_cast<int64_t>(row) * K + (perm ? perm[j] : j)] = from_f32<T>(v);
  }
}

template <typename T, int BITS>
__global__ void qdequant_kernel(const uint32_t* __restrict__ qweight, const float* __restrict__ scales,
                                const uint8_t* __restrict__ zeros, const int32_t* __restrict__ chunk_group,
                                const int32_t* __restrict__ perm, T* __restrict__ w, int N, int K, int G) {
  constexpr int kChunk = 128 / BITS, kPerWord = 32 / BITS;
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  const int nchunks = K / kChunk;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(N) * nchunks) return;
  const int n = static_cast<int>(idx / nchunks), c = static_cast<int>(idx % nchunks);
  const uint4 v = reinterpret_cast<const uint4*>(qweight + static_cast<int64_t>(n) * (K / kPerWord))[c];
  const int g = chunk_group[c];
  const float s = scales[static_cast<int64_t>(n) * G + g];
  const int z = zeros[static_cast<int64_t>(n) * G + g];
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  T* wr = w + static_cast<int64_t>(n) * K;
  if (perm == nullptr) {
    Vec<T, kChunk / 4> o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < kPerWord; ++j)
        o[i].v[j] = from_f32<T>(s * static_cast<float>(static_cast<int>((words[i] >> (BITS * j)) & kMask) - z));
#pragma unroll
    for (int i = 0; i < 4; ++i)
      *reinterpret_cast<Vec<T, kChunk / 4>*>(wr + c * kChunk + i * kPerWord) = o[i];
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kPerWord; ++j)
      wr[perm[c * kChunk + i * kPerWord + j]] =
          from_f32<T>(s * static_cast<float>(static_cast<int>((words[i] >> (BITS * j)) & kMask) - z));
}

template <typename T>
__global__ void gather_cols_kernel(const T* __restrict__ x, const int32_t* __restrict__ perm,
                                   T* __restrict__ out, int M, int K) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(M) * K) return;
  const int64_t m = i / K, j = i % K;
  out[i] = x[m * K + perm[j]];
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void qfill_dummy_kernel(uint32_t* __restrict__ qweight, int64_t words, float* __restrict__ scales,
                                   uint8_t* __restrict__ zeros, int64_t groups, float scale, uint8_t zero,
                                   uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    qweight[i] = static_cast<uint32_t>(splitmix64(seed * 0x100000001b3ull + static_cast<uint64_t>(i)));
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < groups; i += stride) {
    scales[i] = scale;
    zeros[i] = zero;
  }
}

void check_act(DType act, const char* what) {
  if (act != DType::F16 && act != DType::BF16)
    throw std::invalid_argument(std::string(what) + ": activations must be F16 or BF16");
}

}  // namespace

void launch_qgemv(DType act, DType out_dt, int bits, const void* x, const uint32_t* qweight, const float* scales,
                  const uint8_t* zeros, const int32_t* chunk_group, const void* bias, void* out, int64_t ldo,
                  int64_t M, int64_t N, int64_t K, int64_t G, cudaStream_t stream) {
  check_act(act, "launch_qgemv");
  if (M < 1 || M > 8 || N < 1 || K % (128 / bits) != 0 || (bits != 4 && bits != 8) ||
      (out_dt != act && out_dt != DType::F32))
    throw std::invalid_argument("launch_qgemv: unsupported shape or dtype");
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K), g = static_cast<int>(G);
#define PAGODA_QGEMV_T(T, TO, B) \
  qgemv_t<T, TO, B>(x, qweight, scales, zeros, chunk_group, bias, out, ldo, m, n, k, g, stream)
  if (act == DType::BF16) {
    if (out_dt == DType::F32) {
      if (bits == 4) PAGODA_QGEMV_T(__nv_bfloat16, float, 4);
      else PAGODA_QGEMV_T(__nv_bfloat16, float, 8);
    } else {
      if (bits == 4) PAGODA_QGEMV_T(__nv_bfloat16, __nv_bfloat16, 4);
      else PAGODA_QGEMV_T(__nv_bfloat16, __nv_bfloat16, 8);
    }
  } else {
    if (out_dt == DType::F32) {
      if (bits == 4) PAGODA_QGEMV_T(__half, float, 4);
      else PAGODA_QGEMV_T(__half, float, 8);
    } else {
      if (bits == 4) PAGODA_QGEMV_T(__half, __half, 4);
      else PAGODA_QGEMV_T(__half, __half, 8);
    }
  }
#undef PAGODA_QGEMV_T
}

void launch_qmma(DType act, DType out_dt, const void* x, const uint32_t* tiles, const float* scales,
                 const uint8_t* zeros, const int32_t* chunk_group, int64_t group_size, const void* bias, void* out,
                 int64_t ldo, int64_t M, int64_t N, int64_t K, int64_t G, cudaStream_t stream) {
  check_act(act, "launch_qmma");
  if (M < 1 || M > 32 || N % 16 != 0 || K % 64 != 0 || (out_dt != act && out_dt != DType::F32))
    throw std::invalid_argument("launch_qmma: unsupported shape or dtype");
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K), g = static_cast<int>(G);
  const int gs = static_cast<int>(group_size);
  if (act == DType::BF16) {
    if (out_dt == DType::F32)
      qmma_t<__nv_bfloat16, float>(x, tiles, scales, zeros, chunk_group, gs, bias, out, ldo, m, n, k, g, stream);
    else
      qmma_t<__nv_bfloat16, __nv_bfloat16>(x, tiles, scales, zeros, chunk_group, gs, bias, out, ldo, m, n, k, g, stream);
  } else {
    if (out_dt == DType::F32)
      qmma_t<__half, float>(x, tiles, scales, zeros, chunk_group, gs, bias, out, ldo, m, n, k, g, stream);
    else
      qmma_t<__half, __half>(x, tiles, scales, zeros, chunk_group, gs, bias, out, ldo, m, n, k, g, stream);
  }
}

void launch_qdequant_tiled(DType act, const uint32_t* tiles, const float* scales, const uint8_t* zeros,
                           const int32_t* chunk_group, const int32_t* perm, void* w, int64_t N, int64_t K,
                           int64_t G, cudaStream_t stream) {
  check_act(act, "launch_qdequant_tiled");
  const int64_t total = N * K / 8;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>((total + 255) / 256);
  const int n = static_cast<int>(N), k = static_cast<int>(K), g = static_cast<int>(G);
  if (act == DType::BF16)
    qdequant_tiled_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(tiles, scales, zeros, chunk_group, perm,
                                                                    static_cast<__nv_bfloat16*>(w), n, k, g);
  else
    qdequant_tiled_kernel<__half><<<blocks, 256, 0, stream>>>(tiles, scales, zeros, chunk_group, perm,
                                                             static_cast<__half*>(w), n, k, g);
  PAGODA_CUDA_CHECK_LAUNCH("qdequant_tiled_kernel");
}

void launch_qdequant(DType act, int bits, const uint32_t* qweight, const float* scales, const uint8_t* zeros,
                     const int32_t* chunk_group, const int32_t* perm, void* w, int64_t N, int64_t K, int64_t G,
                     cudaStream_t stream) {
  check_act(act, "launch_qdequant");
  const int64_t total = N * (K / (128 / bits));
  if (total == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((total + threads - 1) / threads);
  const int n = static_cast<int>(N), k = static_cast<int>(K), g = static_cast<int>(G);
  if (act == DType::BF16) {
    auto* wp = static_cast<__nv_bfloat16*>(w);
    if (bits == 4) qdequant_kernel<__nv_bfloat16, 4><<<blocks, threads, 0, stream>>>(qweight, scales, zeros, chunk_group, perm, wp, n, k, g);
    else qdequant_kernel<__nv_bfloat16, 8><<<blocks, threads, 0, stream>>>(qweight, scales, zeros, chunk_group, perm, wp, n, k, g);
  } else {
    auto* wp = static_cast<__half*>(w);
    if (bits == 4) qdequant_kernel<__half, 4><<<blocks, threads, 0, stream>>>(qweight, scales, zeros, chunk_group, perm, wp, n, k, g);
    else qdequant_kernel<__half, 8><<<blocks, threads, 0, stream>>>(qweight, scales, zeros, chunk_group, perm, wp, n, k, g);
  }
  PAGODA_CUDA_CHECK_LAUNCH("qdequant_kernel");
}

void launch_gather_cols(DType act, const void* x, const int32_t* perm, void* out, int64_t M, int64_t K,
                        cudaStream_t stream) {
  check_act(act, "launch_gather_cols");
  const int64_t total = M * K;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>((total + 255) / 256);
  // Both act dtypes are 2 bytes: move them as raw 16-bit values.
  gather_cols_kernel<uint16_t><<<blocks, 256, 0, stream>>>(static_cast<const uint16_t*>(x), perm,
                                                           static_cast<uint16_t*>(out), static_cast<int>(M),
                                                           static_cast<int>(K));
  PAGODA_CUDA_CHECK_LAUNCH("gather_cols_kernel");
}

void launch_qfill_dummy(int bits, uint32_t* qweight, float* scales, uint8_t* zeros, int64_t N, int64_t K, int64_t G,
                        uint64_t seed, cudaStream_t stream) {
  const int64_t words = N * K * bits / 32, groups = N * G;
  // Uniform codes over [0, 2^bits): std of q − zero is sqrt((4^bits − 1) / 12).
  const double levels = static_cast<double>(1u << bits);
  const auto scale = static_cast<float>(0.02 / std::sqrt((levels * levels - 1.0) / 12.0));
  const auto zero = static_cast<uint8_t>(1u << (bits - 1));
  qfill_dummy_kernel<<<1024, 256, 0, stream>>>(qweight, words, scales, zeros, groups, scale, zero, seed);
  PAGODA_CUDA_CHECK_LAUNCH("qfill_dummy_kernel");
}

}  // namespace pagoda::cuda
