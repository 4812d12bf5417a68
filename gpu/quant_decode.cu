// qmv_kernel: the packed 4-bit linear for decode batches of M <= 8 rows of x
// (launch_qmv, gpu/quant_kernels.h; codes in the tensor-core layout,
// engine/quant/packed_linear.h tile_int4).
//
// Same arithmetic as qmma_kernel (quant_linear.cu): A = q − z exactly from
// the codes by int4_fragment (gpu/int4_fragment.cuh: LOP3, then HSUB2 of
// magic + z, or for fp16's rows r + 8 one HFMA2) — the weights are exact
// and only x and the output are rounded — one mma per 16 positions, fp32
// sums. What differs is the loop around it:
//  * the scale multiplies the sums once per step of CPG chunks that share
//    a group (4 for group 128: once per two 16-byte loads), from records
//    per (group, row pair) — the zero values {Int4Magic::lo_zero(z(r)),
//    hi_zero(z(r + 8))} and the scales {s(r), s(r + 8)} — that the CTA
//    builds in shared memory before it computes;
//  * B (x) is read as one 16-byte L1 load per chunk for every lane, rows
//    past M repeating row M − 1 (their sums are dropped): no predicates;
//  * one CTA of W warps per 16-feature row tile (N / 16 CTAs; W = 8, 4
//    resident an SM, or W = 4, 8 an SM, for linears of many tiles: qmv_t);
//    the warps split K in runs of whole steps, and a lane streams its
//    run through a ring of kRing 16-byte slots in shared memory filled by
//    cp.async (codes in flight cost no registers); the warps' sums meet in
//    shared memory.
// Measured (H200, docs/PERFORMANCE.md, ninth session), this form against
// qmma in the same call, GB/s of codes at M = 1: qkv 1,388 vs 1,359, o_proj
// 732 vs 712, gate_up 1,878 vs 1,742, down 1,484 vs 1,333; batch-1 decode
// of the Llama-2-7B GPTQ shape 411 vs 394 tok/s (with 16-warp CTAs for
// three of the four linears, which that call showed slower than 8). The
// zero point as a second mma with A = −(magic + z) was as fast, but its
// fp32 sums cancel terms of magnitude magic · Σ x (1024 in fp16), which
// for inputs of one sign costs ~1e-4 relative: not kept. Neither the
// instruction count nor the bytes in flight set the pace: the codes in
// registers and persistent CTAs streaming across tiles ran at the same
// rate, at ~15 cycles between a warp's instructions, 6–7 warps a scheduler.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <stdexcept>

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

constexpr int kRing = 8;  // 16-byte loads a lane keeps in flight (its shared-memory ring)

// d += A·B (mma.m16n8k16, fp32 accumulation); not volatile, so the
// compiler may interleave it with the loads and LOP3s around it.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Shared memory in bytes: the lanes' rings [W][kRing][32] (uint4),
// per (group, row pair) the zero values (uint4: {Int4Magic::lo_zero(z(i)),
// hi_zero(z(i + 8))}, twice) and the two scales (float2), the
// chunk-group table [K / 32] (int32, table kernels), the warps' sums [W][4][32] (fp32).
size_t qmv_smem(int W, int64_t K, int64_t G, bool table) {
  return static_cast<size_t>(W * kRing * 512 + G * 8 * 24 + (table ? K / 32 * 4 : 0) +
                             W * 4 * 32 * 4);
}

// CPG: chunks (32 positions) per step, a divisor of the group's chunks so a
// step never leaves its group; TABLE: the group of a step's first chunk
// comes from chunk_group (act-order, or group sizes not 32 · 2^j), else
// it is chunk >> group_shift.
// W: warps a CTA.
template <typename T, typename TO, int W, int CPG, bool TABLE>
__global__ void __launch_bounds__(W * 32, 32 / W)
    qmv_kernel(const T* __restrict__ x, const uint4* __restrict__ tiles,
               const float* __restrict__ scales, const uint8_t* __restrict__ zeros,
               const int32_t* __restrict__ chunk_group, int group_shift, const T* __restrict__ bias,
               TO* __restrict__ out, int64_t ldo, int M, int K, int G) {
  using Mg = Int4Magic<T>;
  constexpr int SU = CPG >= 2 ? CPG / 2 : 1;  // 16-byte loads per step (CPG 1: two steps per load)
  extern __shared__ __align__(16) uint4 smem4[];
  uint4* ring = smem4;
  uint4* zrec = ring + W * kRing * 32;  // [G][8]: zero values of rows i, i + 8 (twice)
  float2* srec = reinterpret_cast<float2*>(zrec + 8 * G);  // [G][8]: their scales
  int32_t* cg = reinterpret_cast<int32_t*>(srec + 8 * G);
  float* red = reinterpret_cast<float*>(cg + (TABLE ? K / 32 : 0));

  const int t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r4 = lane >> 2, q = lane & 3;
  const int U = K >> 6;  // 16-byte loads a lane per row tile
  const int nsu = U / SU;
  const int u0 = warp * nsu / W * SU, n = (warp + 1) * nsu / W * SU - u0;
  const uint4* wp = tiles + (static_cast<int64_t>(t) * U + u0) * 32 + lane;
  const T* xp = x + static_cast<int64_t>(min(r4, M - 1)) * K + u0 * 64 + 8 * q;
  // The lane's ring: load i of its run goes to slot i % kRing, one commit
  // group per load (empty past the run), so after kRing + i commits,
  // wait_group(kRing - 1) means load i has landed. A lane reads back only
  // what it copied itself: no barrier.
  uint4* slot = ring + warp * kRing * 32 + lane;
#pragma unroll
  for (int i = 0; i < kRing; ++i) {
    if (i < n) cp_async16(slot + i * 32, wp + i * 32, true);
    cp_async_commit();
  }

  for (int e = threadIdx.x; e < 8 * G; e += W * 32) {
    const int i = e & 7, g = e >> 3;
    const int64_t r0 = (static_cast<int64_t>(t) * 16 + i) * G + g,
                  r8 = r0 + 8 * static_cast<int64_t>(G);
    const uint32_t z0 = Mg::lo_zero(static_cast<float>(zeros[r0]));  // int4_fragment's zr
    const uint32_t z8 = Mg::hi_zero(static_cast<float>(zeros[r8]));  // and zr8
    zrec[e] = uint4{z0, z8, z0, z8};
    srec[e] = float2{scales[r0], scales[r8]};
  }
  if constexpr (TABLE)
    for (int c = threadIdx.x; c < K / 32; c += W * 32) cg[c] = chunk_group[c];
  __syncthreads();
  // The ring and the records hold weights only, which depend on nothing
  // earlier in the stream: they were loaded before the wait (gpu/pdl.h).
  pdl_wait_then_release<kPdlEarlyReleaseQuant>();

  // Two accumulator chains (the fragment's two 16-position tiles), summed
  // when a step is scaled.
  float acc[4] = {0.f, 0.f, 0.f, 0.f}, part[2][4] = {};
  uint4 za = {};   // the step's zero fragment
  float2 sc = {};  // and scales
  for (int i0 = 0; i0 < n; i0 += SU) {
#pragma unroll
    for (int s = 0; s < SU; ++s) {
      const int i = i0 + s;
      cp_async_wait<kRing - 1>();
      const uint4 wv = slot[(i & (kRing - 1)) * 32];
      const uint4 xv[2] = {*reinterpret_cast<const uint4*>(xp + i * 64),
                           *reinterpret_cast<const uint4*>(xp + i * 64 + 32)};
      const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (CPG == 1 || (c == 0 && s == 0)) {  // a step starts: its group's record
          const int chunk = 2 * (u0 + i) + c;
          const int g = TABLE ? cg[chunk] : chunk >> group_shift;
          za = zrec[g * 8 + r4];
          sc = srec[g * 8 + r4];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t wd = words[2 * c + h];
          const uint32_t b0 = h == 0 ? xv[c].x : xv[c].z, b1 = h == 0 ? xv[c].y : xv[c].w;
          uint32_t a[4];
          int4_fragment<T>(wd, za.x, za.y, a);
          mma<T>(part[h], a[0], a[1], a[2], a[3], b0, b1);
        }
        if (CPG == 1 || (c == 1 && s == SU - 1)) {  // the step ends: scale its sums
          const float s0 = sc.x, s8 = sc.y;
          acc[0] = fmaf(s0, part[0][0] + part[1][0], acc[0]);
          acc[1] = fmaf(s0, part[0][1] + part[1][1], acc[1]);
          acc[2] = fmaf(s8, part[0][2] + part[1][2], acc[2]);
          acc[3] = fmaf(s8, part[0][3] + part[1][3], acc[3]);
#pragma unroll
          for (int k = 0; k < 4; ++k) part[0][k] = part[1][k] = 0.f;
        }
      }
      // The slot is read (its words were used above): refill it.
      if (i + kRing < n) cp_async16(slot + (i & (kRing - 1)) * 32, wp + (i + kRing) * 32, true);
      cp_async_commit();
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < 4; ++i) red[(warp * 4 + i) * 32 + lane] = acc[i];
  __syncthreads();
  if (warp < 4) {  // warp i sums accumulator i: c0, c1 row r4; c2, c3 row r4 + 8
    const int i = warp;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) v += red[(w * 4 + i) * 32 + lane];
    const int row = t * 16 + r4 + (i < 2 ? 0 : 8), col = 2 * q + (i & 1);
    if (col < M)
      out[static_cast<int64_t>(col) * ldo + row] =
          from_f32<TO>(v + (bias ? to_f32(bias[row]) : 0.f));
  }
}

template <typename T, typename TO, int W, int CPG, bool TABLE>
void qmv_launch(int ntiles, size_t smem, const T* x, const uint4* tiles, const float* s,
                const uint8_t* z, const int32_t* cg, int shift, const T* bias, TO* out, int64_t ldo,
                int M, int K, int G, cudaStream_t st) {
  opt_in_dynamic_smem(reinterpret_cast<const void*>(qmv_kernel<T, TO, W, CPG, TABLE>),
                      smem_optin_limit());
  launch_pdl(qmv_kernel<T, TO, W, CPG, TABLE>, ntiles, W * 32, smem, st, x, tiles, s, z, cg, shift,
             bias, out, ldo, M, K, G);
}

template <typename T, typename TO>
void qmv_t(const void* x, const uint32_t* qw, const float* s, const uint8_t* z, const int32_t* cg,
           int64_t gs, const void* bias, void* out, int64_t ldo, int M, int N, int K, int G,
           cudaStream_t st) {
  // chunk -> group as a shift when group_size is 32 · 2^j, else the table;
  // steps of up to 4 chunks inside one group (act-order: 1, any group).
  const int shift = chunk_group_shift(gs);
  const int64_t chunks = gs > 0 ? gs / 32 : 1;
  const int cpg = chunks % 4 == 0 ? 4 : chunks % 2 == 0 ? 2 : 1;
  const bool table = shift < 0;
  const int ntiles = N / 16;
  // Warps a CTA: 4 (8 CTAs an SM) when the row tiles fill the GPU four
  // times over and 8 such CTAs fit an SM's shared memory (the groups'
  // records grow it: group 128 at K 4096 takes 24 KB, and each CTA 1 KB
  // more the system reserves), else 8. On the H200 (docs/PERFORMANCE.md,
  // thirteenth session) 4-warp CTAs streamed Llama-2-7B's qkv (768 tiles)
  // 9 % and gate_up (1,376) 8 % faster, its o_proj and down (256 tiles)
  // 23-26 % slower; 16-warp CTAs ran every linear 9-16 % slower (ninth
  // session). PAGODA_QMV_WARPS=4 or 8 forces one (a benchmark switch).
  static const int forced = std::atoi(bench_switch("PAGODA_QMV_WARPS").c_str());
  const bool four = ntiles >= 4 * sm_count() &&
                    8 * (qmv_smem(4, K, G, table) + 1024) <= static_cast<size_t>(smem_per_sm());
  const int warps = forced == 4 || forced == 8 ? forced : four ? 4 : 8;
  const size_t smem = qmv_smem(warps, K, G, table);
  if (smem > static_cast<size_t>(smem_optin_limit()))
    throw std::invalid_argument("launch_qmv: too many groups for shared memory");
  const T* xp = static_cast<const T*>(x);
  const auto* tp = reinterpret_cast<const uint4*>(qw);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
#define PAGODA_QMV(C, TB)                                                                         \
  warps == 4 ? qmv_launch<T, TO, 4, C, TB>(ntiles, smem, xp, tp, s, z, cg, shift, bp, op, ldo, M, \
                                           K, G, st)                                              \
             : qmv_launch<T, TO, 8, C, TB>(ntiles, smem, xp, tp, s, z, cg, shift, bp, op, ldo, M, \
                                           K, G, st)
  if (table) {
    if (cpg == 4)
      PAGODA_QMV(4, true);
    else if (cpg == 2)
      PAGODA_QMV(2, true);
    else
      PAGODA_QMV(1, true);
  } else {
    if (cpg == 4)
      PAGODA_QMV(4, false);
    else if (cpg == 2)
      PAGODA_QMV(2, false);
    else
      PAGODA_QMV(1, false);
  }
#undef PAGODA_QMV
  PAGODA_CUDA_CHECK_LAUNCH("qmv_kernel");
}

}  // namespace

bool qmv_fits(int64_t K, int64_t G, int64_t group_size) {
  return K % 64 == 0 && (group_size <= 0 || (group_size % 32 == 0 && K % group_size == 0)) &&
         qmv_smem(8, K, G, true) <= static_cast<size_t>(smem_optin_limit());
}

void launch_qmv(DType act, DType out_dt, const void* x, const uint32_t* tiles, const float* scales,
                const uint8_t* zeros, const int32_t* chunk_group, int64_t group_size,
                const void* bias, void* out, int64_t ldo, int64_t M, int64_t N, int64_t K,
                int64_t G, cudaStream_t stream) {
  if ((act != DType::F16 && act != DType::BF16) || (out_dt != act && out_dt != DType::F32) ||
      M < 1 || M > 8 || N % 16 != 0 || !qmv_fits(K, G, group_size))
    throw std::invalid_argument("launch_qmv: unsupported shape or dtype");
  if (N == 0) return;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K),
            g = static_cast<int>(G);
  if (act == DType::BF16) {
    if (out_dt == DType::F32)
      qmv_t<__nv_bfloat16, float>(x, tiles, scales, zeros, chunk_group, group_size, bias, out, ldo,
                                  m, n, k, g, stream);
    else
      qmv_t<__nv_bfloat16, __nv_bfloat16>(x, tiles, scales, zeros, chunk_group, group_size, bias,
                                          out, ldo, m, n, k, g, stream);
  } else {
    if (out_dt == DType::F32)
      qmv_t<__half, float>(x, tiles, scales, zeros, chunk_group, group_size, bias, out, ldo, m, n,
                           k, g, stream);
    else
      qmv_t<__half, __half>(x, tiles, scales, zeros, chunk_group, group_size, bias, out, ldo, m, n,
                            k, g, stream);
  }
}

}  // namespace pagoda::cuda
