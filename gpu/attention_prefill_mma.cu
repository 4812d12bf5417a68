// Tensor-core prefill attention for bf16/f16 and head_dim 64/128: the same
// problem and row mapping as attention_prefill.cu (paged K/V, causal, GQA
// rows = flattened (token, head) pairs of one KV head, chunked prefill),
// computed as FlashAttention-2 (Dao 2023, arXiv:2307.08691) with
// mma.sync.m16n8k16 (fp32 accumulation): each warp owns 16 or 32 query
// rows; S = Q·Kᵀ for a 64-key tile stays in registers, the online softmax
// rescales the running output, and S's accumulator fragments are re-packed
// in place as the A operand of P·V. Q rows and K/V tiles (gathered from the
// paged cache) sit in padded shared memory (row stride D+8 elements:
// conflict-free ldmatrix rows), filled by cp.async, K/V double-buffered: the
// next tile is in flight while the current one is computed. Fragments come
// by ldmatrix.x4 (V's transposed). Only tiles that reach past a warp's
// first query position are masked; tiles past its last are skipped; row
// tiles start longest first.
// AttentionOptions (AttentionArgs) as in attention_prefill.cu: sliding
// window mask (key > qpos - W; tiles start at the CTA's first visible key,
// rows with no visible key yet keep m = -inf and take exponentials against
// 0), soft-capping and ALiBi on the fp32 scores before the softmax.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/ptx.cuh"
#include "gpu/smem_optin.h"

namespace pagoda::cuda {
namespace {

// A CTA: W warps of MT × 16 query rows each: (W, MT) = (4, 1) for short
// prompts, (8, 1) or (4, 2) for batches with many rows (128 rows a CTA).
// With MT = 2 each K/V fragment read from shared memory serves two 16-row
// tiles (FlashAttention-2's 32 rows a warp for head_dim 128), halving the
// shared-memory traffic per MMA.
// KN keys a K/V tile (64; 32 with 32 rows a warp measured slower,
// docs/PERFORMANCE.md, sixteenth session).

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// TR: soft-capping or ALiBi (or a scale that is not positive) transform the
// scores before the softmax; compiled apart so the common path carries none
// of their code.
template <typename T, int D, int W, int MT, int KN, bool TR>
__global__ void __launch_bounds__(W * 32) prefill_mma_kernel(AttentionArgs a) {
  constexpr int kKeys = KN;
  constexpr int kRows = 16 * MT * W;  // query rows per CTA
  constexpr int LD = D + 8;           // padded smem row (elements): conflict-free ldmatrix rows
  constexpr int KS = D / 16; // k-steps over head_dim
  constexpr int NT = kKeys / 8;
  constexpr int OT = D / 8;  // output n-tiles
  // The CTA's Q rows, then two buffers of the K and V tiles (dynamic:
  // prefill_mma_smem_bytes): the next tile's asynchronous copies run while
  // this one is computed.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);   // [kRows * LD]
  T* const s_kb = s_q + kRows * LD;                // [2][kKeys * LD]
  T* const s_vb = s_kb + 2 * kKeys * LD;           // [2][kKeys * LD]

  const int seq = blockIdx.z, kvh = blockIdx.y;
  const int G = a.num_heads / a.num_kv_heads;
  const int q0 = a.query_start_loc[seq];
  const int qlen = a.query_start_loc[seq + 1] - q0;
  const int ctx = a.context_lens[seq];
  const int nrows = qlen * G;
  // Row tiles in reverse: the CTAs with the most keys start first, so the
  // grid's tail is made of short ones.
  const int row_base = (gridDim.x - 1 - blockIdx.x) * kRows;
  if (row_base >= nrows) return;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int quad = lane / 4, qi = lane % 4;
  const int wrow = warp * 16 * MT;  // the warp's first row in the CTA
  // This thread's rows: quad and quad + 8 of each of the warp's MT tiles;
  // rows past nrows mirror the last real one (a finite max). Only their
  // positions stay in registers; tokens and heads are recomputed.
  const auto row_of = [&](int mt, int i) {
    return min(row_base + wrow + mt * 16 + quad + 8 * i, nrows - 1);
  };
  int qpos[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) qpos[mt][i] = ctx - qlen + row_of(mt, i) / G;
  // The warp's rows' first and last positions (warp-uniform): tiles past
  // the last are skipped, tiles before the first need no causal mask.
  const bool warp_active = row_base + wrow < nrows;
  const int wq_min = ctx - qlen + min(row_base + wrow, nrows - 1) / G;
  const int wq_max = ctx - qlen + min(row_base + wrow + 16 * MT - 1, nrows - 1) / G;
  const int last_row = min(row_base + kRows, nrows) - 1;
  const int n_keys = ctx - qlen + last_row / G + 1;
  const int win = a.sliding_window;
  const int key_lo = win > 0 ? max(0, ctx - qlen + row_base / G - win + 1) : 0;

  const int64_t qstride = static_cast<int64_t>(a.num_heads) * D;
  constexpr int VEC = 8;  // 16-byte chunks
  // The CTA's Q rows into shared memory (one commit group, before the
  // first K/V tile's), rows past nrows mirroring the last.
  {
    const T* qg = static_cast<const T*>(a.q);
    for (int c = tid; c < kRows * D / VEC; c += W * 32) {
      const int r = c / (D / VEC), dv = (c % (D / VEC)) * VEC;
      const int rr = min(row_base + r, nrows - 1);
      cp_async16(s_q + r * LD + dv,
                 qg + (q0 + rr / G) * qstride + static_cast<int64_t>(kvh * G + rr % G) * D + dv,
                 true);
    }
    cp_async_commit();
  }

  float o[MT][OT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int t = 0; t < OT; ++t) o[mt][t][0] = o[mt][t][1] = o[mt][t][2] = o[mt][t][3] = 0.f;
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  const float sc = TR ? 1.f : a.scale * 1.4426950408889634f;

  const T* __restrict__ kc = static_cast<const T*>(a.k_cache);
  const T* __restrict__ vc = static_cast<const T*>(a.v_cache);
  const int32_t* __restrict__ bt = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, Hk = a.num_kv_heads;
  const int bs_log2 = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  constexpr int CHUNKS = kKeys * D / VEC;

  // Tile k0's keys into buffer buf (cp.async, one commit group); keys past
  // n_keys are zero-filled without a read.
  const auto load_tile = [&](int k0, int buf) {
    T* sk = s_kb + buf * kKeys * LD;
    T* sv = s_vb + buf * kKeys * LD;
    for (int c = tid; c < CHUNKS; c += W * 32) {
      const int kj = c / (D / VEC), dv = (c % (D / VEC)) * VEC;
      const int key = k0 + kj;
      const bool ok = key < n_keys;
      int64_t off = 0;
      if (ok) {
        // Power-of-two block sizes (all the engine uses) by shift and mask.
        const int bi = bs_log2 >= 0 ? key >> bs_log2 : key / bs;
        const int bo = bs_log2 >= 0 ? key & (bs - 1) : key % bs;
        off = ((static_cast<int64_t>(bt[bi]) * bs + bo) * Hk + kvh) * D + dv;
      }
      cp_async16(sk + kj * LD + dv, kc + off, ok);
      cp_async16(sv + kj * LD + dv, vc + off, ok);
    }
    cp_async_commit();
  };
  if (key_lo < n_keys) load_tile(key_lo, 0);
  int buf = 0;
  for (int k0 = key_lo; k0 < n_keys; k0 += kKeys, buf ^= 1) {
    if (k0 + kKeys < n_keys) {
      load_tile(k0 + kKeys, buf ^ 1);  // its buffer was last read before the previous barrier
      cp_async_wait<1>();              // Q and this tile have landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* const s_k = s_kb + buf * kKeys * LD;
    const T* const s_v = s_vb + buf * kKeys * LD;

    // A tile none of the warp's rows sees (after its last position, or all
    // before its sliding window) changes nothing: skipped.
    const bool skip = !warp_active || k0 > wq_max || (win > 0 && k0 + kKeys - 1 <= wq_min - win);
    if (!skip) {
      const bool need_mask = win > 0 || k0 + kKeys - 1 > wq_min;
      // S = Q Kᵀ (MT x 16 x 64 per warp): A fragments of Q and B fragments
      // of two 8-key n-tiles at once by ldmatrix.x4.
      float s[MT][NT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t qa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4(qa[mt], s_q + (wrow + mt * 16 + lane % 16) * LD + ks * 16 + (lane / 16) * 8);
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t kb[4];
          ldmatrix_x4(kb, s_k + (np * 16 + lane % 8 + (lane / 16) * 8) * LD + ks * 16 +
                              ((lane / 8) % 2) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma16816<T>(s[mt][2 * np], qa[mt], kb[0], kb[1]);
            mma16816<T>(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Causal mask (tiles that reach past the warp's first position),
        // online softmax (rows quad and quad+8). Scores enter the log2
        // domain as s·sc: sc = scale·log2(e) folded into the exponent's
        // FFMA, or (TR) the transformed score already there (sc = 1).
        if constexpr (TR) {
          float slope[2] = {0.f, 0.f};
          if (a.alibi != nullptr)
#pragma unroll
            for (int ri = 0; ri < 2; ++ri) slope[ri] = a.alibi[kvh * G + row_of(mt, ri) % G];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = k0 + nt * 8 + qi * 2 + (e & 1);
              float v = s[mt][nt][e] * a.scale;
              if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
              s[mt][nt][e] = (v + slope[e >> 1] * static_cast<float>(key)) * 1.4426950408889634f;
            }
        }
        if (need_mask)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = k0 + nt * 8 + qi * 2 + (e & 1);
              const int qp = qpos[mt][e >> 1];
              if (!(key <= qp && (win <= 0 || key > qp - win))) s[mt][nt][e] = -INFINITY;
            }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][nt][e]);
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 1));
          mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 2));
        }
        // mref: the running max, or 0 while a row has seen no visible key
        // (sliding window), so that corr and p are 0 there instead of NaN.
        float corr[2], rs[2] = {0.f, 0.f}, mref[2];
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const float mn = fmaxf(m[mt][ri], mx[ri] * sc);  // sc > 0: -inf stays -inf
          mref[ri] = mn == -INFINITY ? 0.f : mn;
          corr[ri] = ex2_ftz(m[mt][ri] - mref[ri]);  // m = -inf on the first tile: 0
          m[mt][ri] = mn;
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[mt][nt][e] = ex2_ftz(fmaf(s[mt][nt][e], sc, -mref[e >> 1]));
            rs[e >> 1] += s[mt][nt][e];
          }
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) l[mt][ri] = l[mt][ri] * corr[ri] + rs[ri];  // quad-partial
#pragma unroll
        for (int t = 0; t < OT; ++t) {
          o[mt][t][0] *= corr[0];
          o[mt][t][1] *= corr[0];
          o[mt][t][2] *= corr[1];
          o[mt][t][3] *= corr[1];
        }
      }
      // O += P V: P's accumulators become A fragments (k-step j = n-tiles
      // 2j, 2j+1); V's B fragments for two 8-column tiles a ldmatrix.x4.trans.
#pragma unroll
      for (int j = 0; j < kKeys / 16; ++j) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = pack2<T>(s[mt][2 * j][0], s[mt][2 * j][1]);
          pa[mt][1] = pack2<T>(s[mt][2 * j][2], s[mt][2 * j][3]);
          pa[mt][2] = pack2<T>(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
          pa[mt][3] = pack2<T>(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
        }
#pragma unroll
        for (int tp = 0; tp < OT / 2; ++tp) {
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, s_v + (j * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD + tp * 16 +
                                    (lane / 16) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma16816<T>(o[mt][2 * tp], pa[mt], vb[0], vb[1]);
            mma16816<T>(o[mt][2 * tp + 1], pa[mt], vb[2], vb[3]);
          }
        }
      }
    }
    __syncthreads();
  }

  // Full row sums across the quad, normalise, store.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float lr = l[mt][ri];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      const int r = row_base + wrow + mt * 16 + quad + 8 * ri;
      if (r >= nrows) continue;
      const float inv = 1.f / lr;
      T* op = static_cast<T*>(a.out) + (q0 + r / G) * qstride +
              static_cast<int64_t>(kvh * G + r % G) * D + qi * 2;
#pragma unroll
      for (int t = 0; t < OT; ++t)
        *reinterpret_cast<uint32_t*>(op + t * 8) =
            pack2<T>(o[mt][t][2 * ri] * inv, o[mt][t][2 * ri + 1] * inv);
    }
}

// Dynamic shared memory of prefill_mma_kernel<T, D, W, MT, KN>: the CTA's
// Q rows, two K and two V tiles.
template <typename T, int D, int W, int MT, int KN>
constexpr int prefill_mma_smem_bytes() {
  return (16 * MT * W + 4 * KN) * (D + 8) * static_cast<int>(sizeof(T));
}

template <typename T, int D, int W, int MT, int KN = 64>
void launch_mma_dw(const AttentionArgs& a, cudaStream_t stream) {
  const int G = a.num_heads / a.num_kv_heads;
  constexpr int kRows = 16 * MT * W;
  const int tiles = (a.max_query_len * G + kRows - 1) / kRows;
  if (tiles == 0) return;
  constexpr int smem = prefill_mma_smem_bytes<T, D, W, MT, KN>();
  const dim3 grid(tiles, a.num_kv_heads, a.num_seqs);
  // Over 48 KB needs the opt-in, once per kernel and device.
  if (a.softcap > 0.f || a.alibi != nullptr || !(a.scale > 0.f)) {
    opt_in_dynamic_smem(reinterpret_cast<const void*>(prefill_mma_kernel<T, D, W, MT, KN, true>),
                        smem);
    prefill_mma_kernel<T, D, W, MT, KN, true><<<grid, W * 32, smem, stream>>>(a);
  } else {
    opt_in_dynamic_smem(reinterpret_cast<const void*>(prefill_mma_kernel<T, D, W, MT, KN, false>),
                        smem);
    prefill_mma_kernel<T, D, W, MT, KN, false><<<grid, W * 32, smem, stream>>>(a);
  }
  PAGODA_CUDA_CHECK_LAUNCH("prefill_mma_kernel");
}

PrefillAttentionTile g_tile = PrefillAttentionTile::kAuto;

template <typename T, int D>
void launch_mma_d(const AttentionArgs& a, cudaStream_t stream) {
  const int G = a.num_heads / a.num_kv_heads;
  PrefillAttentionTile t = g_tile;
  if (t == PrefillAttentionTile::kAuto) {
    // PAGODA_PREFILL_WIDE=8x16: the 128-row CTAs of 8 warps (a benchmark
    // switch; the default is 4 warps of 32 rows).
    static const bool w8 = bench_switch("PAGODA_PREFILL_WIDE") == "8x16";
    t = a.max_query_len * G < kWideRows ? PrefillAttentionTile::k64Rows
        : w8                            ? PrefillAttentionTile::k128Rows
                                        : PrefillAttentionTile::k128RowsWarp32;
  }
  switch (t) {
    case PrefillAttentionTile::k128Rows:
      launch_mma_dw<T, D, 8, 1>(a, stream);
      break;
    case PrefillAttentionTile::k128RowsWarp32:
      launch_mma_dw<T, D, 4, 2>(a, stream);
      break;
    default:
      launch_mma_dw<T, D, 4, 1>(a, stream);
      break;
  }
}

}  // namespace

void set_prefill_attention_tile(PrefillAttentionTile t) { g_tile = t; }

bool launch_prefill_attention_mma(DType dt, const AttentionArgs& a, cudaStream_t stream) {
  if (dt == DType::F32 || (a.head_dim != 64 && a.head_dim != 128)) return false;
  if (a.num_seqs == 0) return true;
  if (dt == DType::BF16) {
    if (a.head_dim == 64) launch_mma_d<__nv_bfloat16, 64>(a, stream);
    else launch_mma_d<__nv_bfloat16, 128>(a, stream);
  } else {
    if (a.head_dim == 64) launch_mma_d<__half, 64>(a, stream);
    else launch_mma_d<__half, 128>(a, stream);
  }
  return true;
}

}  // namespace pagoda::cuda
