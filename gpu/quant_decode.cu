// qmv_kernel: the packed 4-bit linear for decode batches of M <= 8 rows of x
// (launch_qmv, gpu/quant_kernels.h; codes in the tensor-core layout,
// engine/quant/packed_linear.h tile_int4).
//
// qmma_kernel (quant_linear.cu) subtracts the zero point from every code
// pair (HSUB2) and reads x, the group record and loop predicates per
// 32-position chunk: Nsight Compute put it at ~137 issued instructions per
// 512 bytes of codes a warp loads, issue-bound at 45 % of issue slots while
// DRAM ran at 37 % (docs/PERFORMANCE.md). This kernel spends ~50:
//  * A holds (magic + q) straight from the LOP3 (int4_fragment.cuh) and the
//    zero point enters as a second mma with A = −(magic + z) per row
//    (kNegWord | z: exact), accumulated into the same fp32 sums right after
//    each code mma, so a 32-bit word costs 3 shifts, 4 LOP3s and 2 mma;
//  * the scale multiplies the sums once per step of CPG chunks that share
//    a group (4 for group 128: once per two 16-byte loads), from records
//    per (group, row pair) — the zero fragment {−(magic + z(r)),
//    −(magic + z(r + 8))} twice, and {s(r), s(r + 8)} — that the CTA builds
//    in shared memory before it computes;
//  * B (x) is read as one 16-byte L1 load per chunk for every lane, rows
//    past M repeating row M − 1 (their sums are dropped): no predicates.
// One CTA per 16-feature row tile (N / 16 CTAs, 4 resident an SM); its
// warps split K in runs of whole steps. A lane streams its run through a
// ring of kRing 16-byte slots in shared memory filled by cp.async (codes in
// flight cost no registers: 32 warps an SM keep up to 128 KB in flight;
// with the codes in registers, 24 warps and ~1.3 TB/s); the warps' sums
// meet in shared memory.
// The fp32 sums see (magic + q)·x and −(magic + z)·x alternately, so a
// partial sum never exceeds magic · Σ|x| over 16 positions: the
// cancellation costs ~2^−24 · 1024 · 16 relative to a 16-position term
// at worst (fp16), far below the output's rounding.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/int4_fragment.cuh"
#include "gpu/ptx.cuh"
#include "gpu/quant_kernels.h"

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

// Shared memory in bytes: the lanes' rings [W][kRing][32] (uint4), two
// tiles' records — per (group, row pair) the zero fragment (uint4) and the
// two scales (float2) —, the chunk-group table [K / 32] (int32, table
// kernels), two tiles' warp sums [W][4][32] (fp32).
size_t qmv_smem(int W, int64_t K, int64_t G, bool table) {
  return static_cast<size_t>(W * kRing * 512 + 2 * G * 8 * 24 + (table ? K / 32 * 4 : 0) +
                             2 * W * 4 * 32 * 4);
}

// CPG: chunks (32 positions) per step, a divisor of the group's chunks so a
// step never leaves its group; TABLE: the group of a step's first chunk
// comes from chunk_group (act-order, or group sizes not 32 · 2^j), else
// it is chunk >> group_shift.
// W: warps a CTA (8, or 16 for weights of few row tiles: 4096 features
// make 256 CTAs, half of what the GPU holds at once).
// ZSUB: the zero point subtracted from each A register (HSUB2) instead of
// the second mma (an experiment: fewer mma in each chain, more ALU work).
template <typename T, typename TO, int W, int CPG, bool TABLE, bool ZSUB>
__global__ void __launch_bounds__(W * 32, 32 / W)
    qmv_kernel(const T* __restrict__ x, const uint4* __restrict__ tiles,
               const float* __restrict__ scales, const uint8_t* __restrict__ zeros,
               const int32_t* __restrict__ chunk_group, int group_shift, const T* __restrict__ bias,
               TO* __restrict__ out, int64_t ldo, int M, int K, int G, int nt) {
  using Mg = Int4Magic<T>;
  constexpr int SU = CPG >= 2 ? CPG / 2 : 1;  // 16-byte loads per step (CPG 1: two steps per load)
  constexpr uint32_t kMask = 0x000F000Fu;
  extern __shared__ __align__(16) uint4 smem4[];
  uint4* ring = smem4;
  uint4* zrec = ring + W * kRing * 32;  // [2][G][8]: the A fragment −(magic + z) of rows i, i + 8
  float2* srec = reinterpret_cast<float2*>(zrec + 2 * 8 * G);  // [2][G][8]: their scales
  int32_t* cg = reinterpret_cast<int32_t*>(srec + 2 * 8 * G);
  float* redbuf = reinterpret_cast<float*>(cg + (TABLE ? K / 32 : 0));  // [2][W][4][32]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r4 = lane >> 2, q = lane & 3;
  const int U = K >> 6;  // 16-byte loads a lane per row tile
  const int nsu = U / SU;
  const int u0 = warp * nsu / W * SU, n = (warp + 1) * nsu / W * SU - u0;
  const T* xp = x + static_cast<int64_t>(min(r4, M - 1)) * K + u0 * 64 + 8 * q;
  // The CTA's tiles: blockIdx.x, + gridDim.x, ... (persistent: a lane's
  // stream of loads runs on across tiles, so DRAM latency is paid once a
  // kernel, not once a tile). The lane's ring: its k-th load (over all its
  // tiles) goes to slot k % kRing, one commit group per load (empty past
  // the end), so after kRing + k commits, wait_group(kRing - 1) means load
  // k has landed. A lane reads back only what it copied itself.
  uint4* slot = ring + warp * kRing * 32 + lane;
  int lt = blockIdx.x, li = 0;  // the next load: tile lt, unit u0 + li
  const auto issue = [&](int k) {
    if (n > 0 && lt < nt) {
      cp_async16(slot + (k & (kRing - 1)) * 32, tiles + (static_cast<int64_t>(lt) * U + u0 + li) * 32 + lane,
                 true);
      if (++li == n) li = 0, lt += gridDim.x;
    }
    cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < kRing; ++k) issue(k);

  // Records of tile tt into buffer b (zero fragments [G][8], scales [G][8]):
  // record e = (group e / 8, row pair e % 8). The first kPre records of a
  // thread are read into registers (fetch) while the tile before is being
  // computed and written afterwards (store); any beyond that are read and
  // written at once.
  constexpr int kPre = W == 16 ? 1 : 2;
  float pre_s[kPre][2];
  uint32_t pre_z = 0;
  const auto at = [&](int tt, int e) {
    return (static_cast<int64_t>(tt) * 16 + (e & 7)) * G + (e >> 3);
  };
  const auto put = [&](int b, int e, float s0, float s8, uint32_t z0, uint32_t z8) {
    const uint32_t zb = ZSUB ? Mg::kWord : Mg::kNegWord;
    zrec[b * 8 * G + e] = uint4{zb | z0 * 0x10001u, zb | z8 * 0x10001u, zb | z0 * 0x10001u, zb | z8 * 0x10001u};
    srec[b * 8 * G + e] = float2{s0, s8};
  };
  const auto fetch = [&](int tt) {
#pragma unroll
    for (int p = 0; p < kPre; ++p) {
      const int e = threadIdx.x + p * W * 32;
      if (e < 8 * G) {
        const int64_t r0 = at(tt, e), r8 = r0 + 8 * static_cast<int64_t>(G);
        pre_s[p][0] = scales[r0];
        pre_s[p][1] = scales[r8];
        pre_z = (pre_z & ~(0xFFFFu << (16 * p))) |
                (static_cast<uint32_t>(zeros[r0]) | static_cast<uint32_t>(zeros[r8]) << 8) << (16 * p);
      }
    }
  };
  const auto store = [&](int tt, int b) {
#pragma unroll
    for (int p = 0; p < kPre; ++p) {
      const int e = threadIdx.x + p * W * 32;
      if (e < 8 * G)
        put(b, e, pre_s[p][0], pre_s[p][1], (pre_z >> (16 * p)) & 0xFFu, (pre_z >> (16 * p + 8)) & 0xFFu);
    }
    for (int e = threadIdx.x + kPre * W * 32; e < 8 * G; e += W * 32) {
      const int64_t r0 = at(tt, e), r8 = r0 + 8 * static_cast<int64_t>(G);
      put(b, e, scales[r0], scales[r8], zeros[r0], zeros[r8]);
    }
  };
  const auto build = [&](int tt, int b) {
    fetch(tt);
    store(tt, b);
  };
  build(blockIdx.x, 0);
  if constexpr (TABLE)
    for (int c = threadIdx.x; c < K / 32; c += W * 32) cg[c] = chunk_group[c];
  __syncthreads();

  int k = 0;  // loads consumed
  for (int j = 0, t = blockIdx.x; t < nt; ++j, t += gridDim.x) {
    const uint4* zr = zrec + (j & 1) * 8 * G;
    const float2* sr = srec + (j & 1) * 8 * G;
    // Two accumulator chains (the fragment's two 16-position tiles); the
    // zero point as a second mma in each (or subtracted from A: ZSUB).
    const int tn = t + static_cast<int>(gridDim.x);  // the CTA's next tile
    if (tn < nt) fetch(tn);                          // its records, in flight during this tile
    float acc[4] = {0.f, 0.f, 0.f, 0.f}, part[2][4] = {};
    uint4 za = {};   // the step's zero fragment
    float2 sc = {};  // and scales
    for (int i0 = 0; i0 < n; i0 += SU) {
#pragma unroll
      for (int s = 0; s < SU; ++s, ++k) {
        const int i = i0 + s;
        cp_async_wait<kRing - 1>();
        const uint4 wv = slot[(k & (kRing - 1)) * 32];
        const uint4 xv[2] = {*reinterpret_cast<const uint4*>(xp + i * 64),
                             *reinterpret_cast<const uint4*>(xp + i * 64 + 32)};
        const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (CPG == 1 || (c == 0 && s == 0)) {  // a step starts: its group's records
            const int chunk = 2 * (u0 + i) + c;
            const int g = TABLE ? cg[chunk] : chunk >> group_shift;
            za = zr[g * 8 + r4];
            sc = sr[g * 8 + r4];
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t wd = words[2 * c + h];
            const uint32_t b0 = h == 0 ? xv[c].x : xv[c].z, b1 = h == 0 ? xv[c].y : xv[c].w;
            if constexpr (ZSUB) {
              mma<T>(part[h], Mg::sub(and_or(wd, kMask, Mg::kWord), za.x),
                     Mg::sub(and_or(wd >> 4, kMask, Mg::kWord), za.y),
                     Mg::sub(and_or(wd >> 8, kMask, Mg::kWord), za.x),
                     Mg::sub(and_or(wd >> 12, kMask, Mg::kWord), za.y), b0, b1);
            } else {
              mma<T>(part[h], and_or(wd, kMask, Mg::kWord), and_or(wd >> 4, kMask, Mg::kWord),
                     and_or(wd >> 8, kMask, Mg::kWord), and_or(wd >> 12, kMask, Mg::kWord), b0, b1);
              mma<T>(part[h], za.x, za.y, za.z, za.w, b0, b1);
            }
          }
          if (CPG == 1 || (c == 1 && s == SU - 1)) {  // the step ends: scale its sums
            acc[0] = fmaf(sc.x, part[0][0] + part[1][0], acc[0]);
            acc[1] = fmaf(sc.x, part[0][1] + part[1][1], acc[1]);
            acc[2] = fmaf(sc.y, part[0][2] + part[1][2], acc[2]);
            acc[3] = fmaf(sc.y, part[0][3] + part[1][3], acc[3]);
#pragma unroll
            for (int e = 0; e < 4; ++e) part[0][e] = part[1][e] = 0.f;
          }
        }
        issue(k);  // the slot just read (its words were used above) takes load k + kRing
      }
    }
    float* red = redbuf + (j & 1) * W * 4 * 32;
#pragma unroll
    for (int e = 0; e < 4; ++e) red[(warp * 4 + e) * 32 + lane] = acc[e];
    if (tn < nt) store(tn, (j + 1) & 1);
    __syncthreads();  // tile t's sums and tile t + grid's records are in place
    if (warp < 4) {   // warp e sums accumulator e: c0, c1 row r4; c2, c3 row r4 + 8
      const int e = warp;
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < W; ++w) v += red[(w * 4 + e) * 32 + lane];
      const int row = t * 16 + r4 + (e < 2 ? 0 : 8), col = 2 * q + (e & 1);
      if (col < M)
        out[static_cast<int64_t>(col) * ldo + row] = from_f32<TO>(v + (bias ? to_f32(bias[row]) : 0.f));
    }
  }
  cp_async_wait<0>();
}

template <typename T, typename TO, int W, int CPG, bool TABLE, bool ZSUB>
void qmv_launch(int ntiles, size_t smem, const T* x, const uint4* tiles, const float* s,
                const uint8_t* z, const int32_t* cg, int shift, const T* bias, TO* out, int64_t ldo,
                int M, int K, int G, cudaStream_t st) {
  static const bool attr = [] {
    PAGODA_CUDA_CHECK(cudaFuncSetAttribute(qmv_kernel<T, TO, W, CPG, TABLE, ZSUB>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_optin_limit()));
    return true;
  }();
  (void)attr;
  // Persistent: as many CTAs as the GPU holds at once (at this shared
  // memory size), or one a tile.
  static thread_local size_t cached_smem = 0;
  static thread_local int cached_fit = 0;
  if (cached_smem != smem) {
    int dev = 0, sms = 0, per = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    PAGODA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per, qmv_kernel<T, TO, W, CPG, TABLE, ZSUB>, W * 32, smem));
    cached_smem = smem;
    cached_fit = sms * (per > 0 ? per : 1);
  }
  const int grid = ntiles < cached_fit ? ntiles : cached_fit;
  qmv_kernel<T, TO, W, CPG, TABLE, ZSUB>
      <<<grid, W * 32, smem, st>>>(x, tiles, s, z, cg, shift, bias, out, ldo, M, K, G, ntiles);
}

template <typename T, typename TO>
void qmv_t(const void* x, const uint32_t* qw, const float* s, const uint8_t* z, const int32_t* cg,
           int64_t gs, const void* bias, void* out, int64_t ldo, int M, int N, int K, int G,
           cudaStream_t st) {
  // chunk -> group as a shift when group_size is 32 · 2^j, else the table;
  // steps of up to 4 chunks inside one group (act-order: 1, any group).
  int shift = -1, cpg = 1;
  if (gs > 0) {
    for (int j = 0; j < 24; ++j)
      if (int64_t{32} << j == gs) shift = j;
    const int64_t chunks = gs / 32;
    cpg = chunks % 4 == 0 ? 4 : chunks % 2 == 0 ? 2 : 1;
  }
  const bool table = shift < 0;
  const int ntiles = N / 16;
  // 16 warps a CTA where 8-warp CTAs would not fill the GPU twice over
  // (PAGODA_QMV_WARPS=8 or 16 forces one: a benchmark switch).
  static const int forced = [] {
    const char* v = std::getenv("PAGODA_QMV_WARPS");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  static const int sms = [] {
    int dev = 0, n = 0;
    PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  int W = forced == 8 || forced == 16 ? forced : ntiles < 2 * 4 * sms ? 16 : 8;
  if (qmv_smem(W, K, G, table) > static_cast<size_t>(smem_optin_limit())) W = 8;
  const size_t smem = qmv_smem(W, K, G, table);
  if (smem > static_cast<size_t>(smem_optin_limit()))
    throw std::invalid_argument("launch_qmv: too many groups for shared memory");
  const T* xp = static_cast<const T*>(x);
  const auto* tp = reinterpret_cast<const uint4*>(qw);
  const T* bp = static_cast<const T*>(bias);
  TO* op = static_cast<TO*>(out);
  static const bool zsub = [] {
    const char* v = std::getenv("PAGODA_QMV_ZERO");
    return v != nullptr && std::string(v) == "sub";
  }();
#define PAGODA_QMV_Z(C, TB, Z)                                                                     \
  (W == 16 ? qmv_launch<T, TO, 16, C, TB, Z>(ntiles, smem, xp, tp, s, z, cg, shift, bp, op, ldo, M, \
                                             K, G, st)                                              \
           : qmv_launch<T, TO, 8, C, TB, Z>(ntiles, smem, xp, tp, s, z, cg, shift, bp, op, ldo, M,  \
                                            K, G, st))
#define PAGODA_QMV(C, TB) (zsub ? PAGODA_QMV_Z(C, TB, true) : PAGODA_QMV_Z(C, TB, false))
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
#undef PAGODA_QMV_Z
  PAGODA_CUDA_CHECK_LAUNCH("qmv_kernel");
}

}  // namespace

bool qmv_fits(int64_t K, int64_t G) {
  return K % 64 == 0 && qmv_smem(8, K, G, true) <= static_cast<size_t>(smem_optin_limit());
}

void launch_qmv(DType act, DType out_dt, const void* x, const uint32_t* tiles, const float* scales,
                const uint8_t* zeros, const int32_t* chunk_group, int64_t group_size,
                const void* bias, void* out, int64_t ldo, int64_t M, int64_t N, int64_t K,
                int64_t G, cudaStream_t stream) {
  if ((act != DType::F16 && act != DType::BF16) || (out_dt != act && out_dt != DType::F32) ||
      M < 1 || M > 8 || N % 16 != 0 || K % 64 != 0 ||
      (group_size > 0 && (group_size % 32 != 0 || K % group_size != 0)))
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
