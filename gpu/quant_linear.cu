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
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/int4_fragment.cuh"
#include "gpu/pdl.cuh"
#include "gpu/ptx.cuh"
#include "gpu/quant_kernels.h"
#include "gpu/smem_optin.h"

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
// qmma_kernel, for up to 8 * NT rows of x (decode batches up to 64): a
// persistent grid (as many CTAs as fit the GPU at once) whose CTAs take
// groups of RT 16-feature row tiles in turn (RT = 2 from 17 rows: each x
// fragment then serves both tiles); the W warps of a CTA split the input
// positions (contiguous runs of 16-byte loads of four 16-position tiles).
// The weight stream never stops: a warp issues its next kMmaUnroll loads
// (half as many from 7 batch tiles, whose accumulators need the registers) —
// of this tile or of the CTA's next one — before it computes the current
// ones, and the next tile's scales and zeros are copied into shared memory
// asynchronously (cp.async) while this tile is computed. (Short-lived CTAs
// that load once and compute once reached ~1.3 TB/s: each waits out a full
// memory latency with nothing else in flight; docs/PERFORMANCE.md.)
// A lane's word of a tile is its A fragment of mma.m16n8k16: int4_fragment
// (gpu/int4_fragment.cuh) builds the four registers as (magic + q) pairs by
// LOP3 and subtracts (magic + zero) exactly by HSUB2 (fp16's rows r + 8: one
// HFMA2 on the unshifted high nibbles), so A holds q − zero exactly in
// fp16 / bf16 and an fp32 accumulator gets Σ (q − zero)·x over a
// 32-position chunk (one group), which the row's scale then multiplies into
// the sum. B (x, n = the batch row) is read from L1/L2 as one 16-byte load
// per chunk (the layout's column order, packed_linear.h). The weights are
// never rounded: only x and the output are in fp16 / bf16. The warps' sums
// meet in shared memory. Marlin (Frantar et al. 2024) does the same
// dequantization into fragments, with asynchronous copies and larger tiles
// for big batches.
constexpr int kMmaUnroll = 4;
constexpr int kMmaWarps = 8;

__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Shared memory of qmma_kernel, in 4-byte words: two buffers of a tile
// group's raw scales [16 RT][G + 1] (fp32) and zeros [16 RT][4 * zstride]
// (uint8; the padding spreads rows over banks), the records [RT][G][8]
// (uint4: the scales of rows i and i + 8 of a tile, Int4Magic::lo_zero(z(i))
// and hi_zero(z(i + 8)), built from a raw buffer once per tile group so the
// loop reads one record per chunk), the chunk groups [K / 32] (act-order or
// irregular groups) and the warps' partial sums [W][RT * NT * 4][32].
struct QmmaSmem {
  int sstride, zstride, buf, rec, cg, red, total;
  __host__ __device__ QmmaSmem(int NT, int RT, int K, int G, bool table) {
    sstride = G + 1;
    zstride = (G + 3) / 4 + 1;
    buf = 16 * RT * (sstride + zstride);
    rec = (2 * buf + 3) & ~3;  // 16-byte aligned
    cg = rec + 32 * G * RT;
    red = cg + (table ? K / 32 : 0);
    total = red + kMmaWarps * RT * NT * 4 * 32;
  }
};

// RT: row tiles a CTA takes at once (a tile group): each lane's x for a
// chunk (NT 16-byte loads) then serves RT tiles' A fragments, so x's
// traffic through L1 per byte of codes falls RT-fold (at M = 32 one tile
// read 8 bytes of x per byte of codes).
template <typename T, typename TO, int NT, int RT, int MINB>
__global__ void __launch_bounds__(kMmaWarps * 32, MINB)
    qmma_kernel(const T* __restrict__ x, const uint4* __restrict__ tiles,
                const float* __restrict__ scales, const uint8_t* __restrict__ zeros,
                const int32_t* __restrict__ chunk_group, int group_shift,
                const T* __restrict__ bias, TO* __restrict__ out, int64_t ldo, int M, int K, int G,
                int ntiles) {
  using Mg = Int4Magic<T>;
  static_assert(RT >= 1 && kMmaUnroll % RT == 0, "a batch takes whole loads of each row tile");
  // 16-byte loads of each tile in a batch: half as many from 7 batch tiles,
  // whose accumulators leave no registers for them (spills otherwise).
  constexpr int U = (NT >= 7 ? kMmaUnroll / 2 : kMmaUnroll) / RT;
  extern __shared__ __align__(16) uint32_t smem[];
  const QmmaSmem L(NT, RT, K, G, group_shift < 0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ngroups = K / 64;  // 16-byte loads per lane per row tile
  // Each warp takes a contiguous run of them (its groups change rarely).
  const int per = (ngroups + kMmaWarps - 1) / kMmaWarps;
  const int kb0 = min(ngroups, warp * per), kb1 = min(ngroups, kb0 + per);
  const int nbatch = (kb1 - kb0 + U - 1) / U;  // may be 0 (short rows)
  const int r4 = lane / 4;
  const int ngt = (ntiles + RT - 1) / RT;  // tile groups

  // Copies tile group tg's scales and zeros into buffer b (one commit group).
  const auto stage = [&](int tg, int b) {
    if (tg < ngt) {
      const int rows = 16 * min(RT, ntiles - tg * RT);
      float* ss = reinterpret_cast<float*>(smem + b * L.buf);
      uint32_t* zs = smem + b * L.buf + 16 * RT * L.sstride;
      const float* st = scales + static_cast<int64_t>(tg) * RT * 16 * G;
      const uint8_t* zt = zeros + static_cast<int64_t>(tg) * RT * 16 * G;
      for (int e = threadIdx.x; e < rows * G; e += blockDim.x)
        cp_async4(ss + (e / G) * L.sstride + e % G, st + e);
      // zeros: 4 bytes at a time when a row's G bytes are whole words;
      // otherwise (G % 4 != 0: rows not word-aligned) plain byte loads.
      if (G % 4 == 0) {
        const int wpr = G / 4;
        for (int e = threadIdx.x; e < rows * wpr; e += blockDim.x)
          cp_async4(zs + (e / wpr) * L.zstride + e % wpr, zt + 4 * e);
      } else {
        for (int e = threadIdx.x; e < rows * G; e += blockDim.x)
          reinterpret_cast<uint8_t*>(zs + (e / G) * L.zstride)[e % G] = zt[e];
      }
    }
    cp_async_commit();
  };

  int32_t* cg = reinterpret_cast<int32_t*>(smem + L.cg);
  if (group_shift < 0)
    for (int c = threadIdx.x; c < K / 32; c += blockDim.x) cg[c] = chunk_group[c];
  uint4* rec = reinterpret_cast<uint4*>(smem + L.rec);

  // A warp's batches over the CTA's tile groups: batch bi of group tg is
  // its loads kb0 + bi · U ... of each tile (fewer in the last batch).
  const auto load = [&](uint4(&dst)[U][RT], int tg, int bi) {
    const int kb = kb0 + bi * U;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int t = tg * RT + r;
      const uint4* base = tiles + (static_cast<int64_t>(t) * ngroups + kb) * 32 + lane;
#pragma unroll
      for (int u = 0; u < U; ++u)
        dst[u][r] = t < ntiles && kb + u < kb1 ? ld_stream(base + u * 32) : uint4{0, 0, 0, 0};
    }
  };

  uint4 cur[U][RT], nxt[U][RT];
  int tg = blockIdx.x;
  if (nbatch > 0) load(cur, tg, 0);
  stage(tg, 0);
  // The first weights and scales depend on nothing earlier in the stream:
  // they are in flight before the wait (gpu/pdl.h).
  pdl_wait_then_release<kPdlEarlyReleaseQuant>();
  for (int j = 0; tg < ngt; ++j, tg += gridDim.x) {
    const int tn = tg + gridDim.x;
    stage(tn, (j + 1) & 1);  // the next group's scales, in flight during this one
    cp_async_wait<1>();      // this group's are here
    __syncthreads();
    {
      const float* ss = reinterpret_cast<const float*>(smem + (j & 1) * L.buf);
      const uint8_t* zs =
          reinterpret_cast<const uint8_t*>(smem + (j & 1) * L.buf + 16 * RT * L.sstride);
      for (int e = threadIdx.x; e < RT * 8 * G; e += blockDim.x) {
        const int i = 16 * (e / (8 * G)) + e % 8,
                  g = (e / 8) % G;  // record [tile][g][row i of the tile]
        rec[e] = uint4{__float_as_uint(ss[i * L.sstride + g]),
                       __float_as_uint(ss[(i + 8) * L.sstride + g]),
                       Mg::lo_zero(static_cast<float>(zs[i * 4 * L.zstride + g])),
                       Mg::hi_zero(static_cast<float>(zs[(i + 8) * 4 * L.zstride + g]))};
      }
    }
    __syncthreads();
    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][q][i] = 0.f;
    for (int bi = 0; bi < nbatch; ++bi) {
      if (bi + 1 < nbatch)
        load(nxt, tg, bi + 1);
      else
        load(nxt, tn, 0);  // the next group's first loads (none past the last)
      const int kb = kb0 + bi * U;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int kg = kb + u;
        if (kg >= kb1) break;
#pragma unroll
        for (int c = 0; c < 2; ++c) {  // a chunk: two 16-position tiles of one group
          const int chunk = kg * 2 + c;
          const int g = group_shift >= 0 ? chunk >> group_shift : cg[chunk];
          // The lane's x for the chunk: positions 8 (lane % 4) .. + 7 of it
          // (packed_linear.h): B of tile h is {.x, .y} (h = 0), {.z, .w}.
          uint4 xb[NT];
#pragma unroll
          for (int q = 0; q < NT; ++q) {
            const int m = q * 8 + r4;
            xb[q] = m < M ? *reinterpret_cast<const uint4*>(x + static_cast<int64_t>(m) * K + chunk * 32 +
                                                            8 * (lane % 4))
                          : uint4{0, 0, 0, 0};
          }
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            const uint4 sz = rec[(r * G + g) * 8 + r4];
            const uint32_t words[4] = {cur[u][r].x, cur[u][r].y, cur[u][r].z, cur[u][r].w};
            float part[NT][4];
#pragma unroll
            for (int q = 0; q < NT; ++q)
#pragma unroll
              for (int i = 0; i < 4; ++i) part[q][i] = 0.f;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t a[4];
              int4_fragment<T>(words[2 * c + h], sz.z, sz.w, a);
#pragma unroll
              for (int q = 0; q < NT; ++q)
                mma16816<T>(part[q], a, h == 0 ? xb[q].x : xb[q].z, h == 0 ? xb[q].y : xb[q].w);
            }
            const float s0 = __uint_as_float(sz.x), s8 = __uint_as_float(sz.y);
#pragma unroll
            for (int q = 0; q < NT; ++q) {
              acc[r][q][0] = fmaf(s0, part[q][0], acc[r][q][0]);
              acc[r][q][1] = fmaf(s0, part[q][1], acc[r][q][1]);
              acc[r][q][2] = fmaf(s8, part[q][2], acc[r][q][2]);
              acc[r][q][3] = fmaf(s8, part[q][3], acc[r][q][3]);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < RT; ++r) cur[u][r] = nxt[u][r];
    }
    if (nbatch == 0) load(cur, tn, 0);  // (warps with no positions keep nothing in flight)
    float* red = reinterpret_cast<float*>(smem + L.red);  // [W][RT * NT * 4][32]
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          red[(warp * RT * NT * 4 + (r * NT + q) * 4 + i) * 32 + lane] = acc[r][q][i];
    __syncthreads();  // also: every warp is done with this group's records
    if (warp < RT && tg * RT + warp < ntiles) {  // warp r sums and writes tile r
      const int r = warp, r0 = (tg * RT + r) * 16 + r4, r8 = r0 + 8;
#pragma unroll
      for (int q = 0; q < NT; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float v = 0.f;
#pragma unroll
          for (int w = 0; w < kMmaWarps; ++w)
            v += red[(w * RT * NT * 4 + (r * NT + q) * 4 + i) * 32 + lane];
          const int row = i < 2 ? r0 : r8;  // C fragment: c0, c1 row r0; c2, c3 row r8
          const int m = q * 8 + 2 * (lane % 4) + (i % 2);
          if (m < M) out[static_cast<int64_t>(m) * ldo + row] = from_f32<TO>(v + (bias ? to_f32(bias[row]) : 0.f));
        }
    }
    __syncthreads();  // red is free again
  }
  cp_async_wait<0>();
}

template <typename T, typename TO, int NT, int RT, int MINB>
void qmma_launch(int ntiles, size_t smem, const T* xp, const uint4* tp, const float* s,
                 const uint8_t* z, const int32_t* cg, int shift, const T* bp, TO* op, int64_t ldo,
                 int M, int K, int G, cudaStream_t st) {
  opt_in_dynamic_smem(reinterpret_cast<const void*>(qmma_kernel<T, TO, NT, RT, MINB>),
                      smem_optin_limit());
  static const int fit = [] {  // CTAs of this kernel the GPU holds at once (at a typical smem size)
    int per = 0;
    PAGODA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per, qmma_kernel<T, TO, NT, RT, MINB>, kMmaWarps * 32, 16 * 1024));
    return sm_count() * (per > 0 ? per : 1);
  }();
  const int ngt = (ntiles + RT - 1) / RT;
  const int grid = ngt < fit ? ngt : fit;
  launch_pdl(qmma_kernel<T, TO, NT, RT, MINB>, grid, kMmaWarps * 32, smem, st, xp, tp, s, z, cg,
             shift, bp, op, ldo, M, K, G, ntiles);
}

// Row tiles a qmma CTA takes at once for NT batch tiles: 2 from 17 rows of
// x up (x's L1 traffic halved; qkv at M = 32 971 GB/s of codes against 699
// with one, docs/PERFORMANCE.md) unless PAGODA_QMMA_ROW_TILES=1 (a
// benchmark switch) or its shared memory does not fit. At 9-16 rows two
// tiles measured no better (128 registers for 2 CTAs an SM: spills).
int qmma_row_tiles(int NT) {
  static const bool one = bench_switch("PAGODA_QMMA_ROW_TILES") == "1";
  return NT >= 3 && !one ? 2 : 1;
}

template <typename T, typename TO>
void qmma_t(const void* x, const uint32_t* qw, const float* s, const uint8_t* z, const int32_t* cg, int gs,
            const void* bias, void* out, int64_t ldo, int M, int N, int K, int G, cudaStream_t st) {
  const T* xp = static_cast<const T*>(x);
  const auto* tp = reinterpret_cast<const uint4*>(qw);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  // chunk -> group as a shift when group_size is 32 · 2^j; the table otherwise.
  const int shift = chunk_group_shift(gs);
  const int NT = (M + 7) / 8;
  const auto smem_of = [&](int rt) {
    return static_cast<size_t>(QmmaSmem(NT, rt, K, G, shift < 0).total) * 4;
  };
  const auto limit = static_cast<size_t>(smem_optin_limit());
  const int wanted = qmma_row_tiles(NT);
  const int RT = smem_of(wanted) <= limit ? wanted : 1;  // two tiles only where they fit
  const size_t smem = smem_of(RT);
  if (smem > limit) throw std::invalid_argument("launch_qmma: too many groups for shared memory");
  const int ntiles = N / 16;
#define PAGODA_QMMA(NT_, RT_, MB) \
  qmma_launch<T, TO, NT_, RT_, MB>(ntiles, smem, xp, tp, s, z, cg, shift, bp, op, ldo, M, K, G, st)
  // Two CTAs an SM: each warp keeps 4-8 loads in flight and registers to
  // interleave its chunks' mma chains (three CTAs at 80 registers spill and
  // ran slower: docs/PERFORMANCE.md). With two row tiles a batch is 2
  // loads of each: the same bytes in flight. From 7 batch tiles (one CTA an
  // SM) a batch is half that: 1 load of each of two tiles.
  switch (NT) {
    case 1:
      PAGODA_QMMA(1, 1, 2);
      break;
    case 2:
      PAGODA_QMMA(2, 1, 2);
      break;
    case 3:
      RT == 2 ? PAGODA_QMMA(3, 2, 1) : PAGODA_QMMA(3, 1, 1);
      break;
    case 4:
      RT == 2 ? PAGODA_QMMA(4, 2, 1) : PAGODA_QMMA(4, 1, 1);
      break;
    case 5:
      RT == 2 ? PAGODA_QMMA(5, 2, 1) : PAGODA_QMMA(5, 1, 1);
      break;
    case 6:
      RT == 2 ? PAGODA_QMMA(6, 2, 1) : PAGODA_QMMA(6, 1, 1);
      break;
    case 7:
      RT == 2 ? PAGODA_QMMA(7, 2, 1) : PAGODA_QMMA(7, 1, 1);
      break;
    default:
      RT == 2 ? PAGODA_QMMA(8, 2, 1) : PAGODA_QMMA(8, 1, 1);
      break;
  }
#undef PAGODA_QMMA
  PAGODA_CUDA_CHECK_LAUNCH("qmma_kernel");
}

// The tiled codes of N rows dequantized into w [N, K] (input order): one
// thread per lane word group (a 16-byte load: its row pair's 4 tiles of 16
// positions), which holds positions 8 (lane % 4) .. + 7 of two 32-position
// chunks for rows lane / 4 and lane / 4 + 8 (packed_linear.h), written as
// four 16-byte stores (a warp writes 64 contiguous bytes of 8 rows each).
template <typename T>
__global__ void qdequant_tiled_kernel(const uint4* __restrict__ tiles, const float* __restrict__ scales,
                                      const uint8_t* __restrict__ zeros, const int32_t* __restrict__ chunk_group,
                                      T* __restrict__ w, int N, int K, int G) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (row tile, kb, lane)
  if (idx >= static_cast<int64_t>(N) * K / 32) return;  // 32 codes a thread
  const int lane = static_cast<int>(idx % 32), nkb = K / 64;
  const int kb = static_cast<int>((idx / 32) % nkb), rt = static_cast<int>(idx / 32 / nkb);
  const uint4 v = tiles[idx];
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int chunk = kb * 2 + c, g = chunk_group[chunk];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = rt * 16 + lane / 4 + 8 * rr;
      const int64_t at = static_cast<int64_t>(row) * G + g;
      const float s = scales[at];
      const int z = zeros[at];
      // Positions +0..3 from tile h = 0, +4..7 from h = 1: nibbles 0, 4,
      // 2, 6 (row lane / 4) or 1, 5, 3, 7 (row + 8) of the tile's word.
      __align__(16) T vals[8];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const int nib = rr + 4 * (f % 2) + 2 * (f / 2);
          vals[4 * h + f] =
              from_f32<T>(s * static_cast<float>(static_cast<int>((words[2 * c + h] >> (4 * nib)) & 15u) - z));
        }
      *reinterpret_cast<uint4*>(w + static_cast<int64_t>(row) * K + chunk * 32 + 8 * (lane % 4)) =
          *reinterpret_cast<const uint4*>(vals);
    }
  }
}

// The same with an act-order permutation: w[n, perm[j]] (scattered stores;
// one thread per lane word).
template <typename T>
__global__ void qdequant_tiled_perm_kernel(const uint32_t* __restrict__ tiles, const float* __restrict__ scales,
                                           const uint8_t* __restrict__ zeros, const int32_t* __restrict__ chunk_group,
                                           const int32_t* __restrict__ perm, T* __restrict__ w, int N, int K,
                                           int G) {
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
    const int j = (kt / 2) * 32 + 8 * (lane % 4) + 4 * (kt % 2) + 2 * (p / 2) + h;  // packed_linear.h
    const int g = chunk_group[j / 32];
    const float v = scales[static_cast<int64_t>(row) * G + g] *
                    static_cast<float>(static_cast<int>((word >> (4 * nib)) & 15u) -
                                       static_cast<int>(zeros[static_cast<int64_t>(row) * G + g]));
    w[static_cast<int64_t>(row) * K + perm[j]] = from_f32<T>(v);
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

namespace {
// One attribute of the current device (cudaDeviceGetAttribute).
int current_device_attribute(cudaDeviceAttr attr) {
  int dev = 0, v = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
  PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, dev));
  return v;
}
}  // namespace

// Dynamic shared memory a block may opt in to on this device.
int smem_optin_limit() {
  static const int limit = current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  return limit;
}

int smem_per_sm() {
  static const int bytes = current_device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  return bytes;
}

int sm_count() {
  static const int n = current_device_attribute(cudaDevAttrMultiProcessorCount);
  return n;
}

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
  if (M < 1 || M > 64 || N % 16 != 0 || K % 64 != 0 || (out_dt != act && out_dt != DType::F32))
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

int64_t qmma_max_rows(int64_t K, int64_t G) {
  if (K % 64 != 0) return 0;
  // One row tile a CTA (the fallback) with the chunk-group table: the most
  // shared memory a linear of these K and G can need for NT batch tiles.
  for (int nt = 8; nt >= 1; --nt)
    if (static_cast<int64_t>(
            QmmaSmem(nt, 1, static_cast<int>(K), static_cast<int>(G), true).total) *
            4 <=
        smem_optin_limit())
      return 8 * nt;
  return 0;
}

bool qmma_fits(int64_t K, int64_t G) { return qmma_max_rows(K, G) >= 32; }

void launch_qdequant_tiled(DType act, const uint32_t* tiles, const float* scales, const uint8_t* zeros,
                           const int32_t* chunk_group, const int32_t* perm, void* w, int64_t N, int64_t K,
                           int64_t G, cudaStream_t stream) {
  check_act(act, "launch_qdequant_tiled");
  const int n = static_cast<int>(N), k = static_cast<int>(K), g = static_cast<int>(G);
  if (N * K == 0) return;
  if (perm == nullptr) {
    const auto blocks = static_cast<unsigned>((N * K / 32 + 255) / 256);
    const auto* tp = reinterpret_cast<const uint4*>(tiles);
    if (act == DType::BF16)
      qdequant_tiled_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(tp, scales, zeros, chunk_group,
                                                                      static_cast<__nv_bfloat16*>(w), n, k, g);
    else
      qdequant_tiled_kernel<__half><<<blocks, 256, 0, stream>>>(tp, scales, zeros, chunk_group,
                                                               static_cast<__half*>(w), n, k, g);
    PAGODA_CUDA_CHECK_LAUNCH("qdequant_tiled_kernel");
    return;
  }
  const auto blocks = static_cast<unsigned>((N * K / 8 + 255) / 256);
  if (act == DType::BF16)
    qdequant_tiled_perm_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(
        tiles, scales, zeros, chunk_group, perm, static_cast<__nv_bfloat16*>(w), n, k, g);
  else
    qdequant_tiled_perm_kernel<__half><<<blocks, 256, 0, stream>>>(tiles, scales, zeros, chunk_group, perm,
                                                                  static_cast<__half*>(w), n, k, g);
  PAGODA_CUDA_CHECK_LAUNCH("qdequant_tiled_perm_kernel");
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
