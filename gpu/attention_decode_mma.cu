// Tensor-core decode attention for bf16/f16, head_dim 64/128 and up to 16
// query heads per KV head: the problem, partitions and workspace of
// attention_decode.cu (Flash-Decoding over the paged cache; its combine
// kernel merges the partitions), computed with mma.sync.m16n8k16 the way
// FlashInfer's decode kernels treat grouped queries: the G query heads that
// read one KV head are the MMA's M rows (16, padded), so each K/V element
// loaded serves all of them, and fp32 scalar math per (head, key) becomes
// a few MMAs per 16 keys.
//
// One CTA per (KV head, sequence, partition); its 4 warps take the
// partition's 16-key blocks in turn (block b to warp b % 4), each with its
// own online softmax (FlashAttention-2, Dao 2023) and output accumulator,
// and merge through shared memory at the end. No shared memory in the loop:
// each lane loads its fragments straight from the cache in 16-byte vectors,
// because the MMA's k and n positions are assigned to head dimensions so
// that a lane's share of a row is contiguous:
//  - S = Q·Kᵀ (A = Q [16 heads × 16 dims], B = Kᵀ [16 dims × 8 keys]): in
//    k-step ks, lane quad position t holds k slots {2t, 2t+1, 2t+8, 2t+9},
//    mapped to dims t·D/4 + 4ks + {0, 1, 2, 3}; over the D/16 k-steps a
//    lane so holds dims [t·D/4, (t+1)·D/4) of its query rows and of its
//    key (lane / 4, and + 8): D/32 16-byte loads per row.
//  - O = P·V (A = P [16 heads × 16 keys] re-packed from S's accumulators,
//    B = V [16 keys × 8 dims]): in output n-tile j, column n is dim
//    n·D/8 + j, so a lane (n = lane / 4) needs dims [n·D/8, (n+1)·D/8) of
//    its 4 keys (2t, 2t+1, 2t+8, 2t+9): D/64 16-byte loads per key, the
//    bf16 pairs of two keys joined with one byte permute per fragment; the
//    accumulator's (row, 2t + e) of tile j is dim (2t + e)·D/8 + j, so a
//    lane ends holding dims [t·D/4, (t+1)·D/4) of its rows.
// P enters the second MMA rounded to the input type (as FlashAttention);
// scores, softmax and sums are fp32. Soft-capping, ALiBi and the sliding
// window as attention_decode.cu (AttentionArgs).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "gpu/cuda_check.h"
#include "gpu/decode_partition.cuh"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"
#include "gpu/ptx.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBlock = 16;  // keys per warp step
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// TR: soft-capping or ALiBi (or a scale that is not positive) transform the
// scores; compiled apart so the common path carries none of their code.
// Registers bounded for 3 CTAs an SM (168, none spilled with Q's fragments
// in shared memory): 12 warps an SM keep more K/V loads in flight than 8
// (docs/PERFORMANCE.md, sixteenth session: 256 x 512 Llama heads 77 -> 93 %
// of copy bandwidth).
template <typename T, int D, bool TR>
__global__ void __launch_bounds__(kWarps * 32, 3)
    decode_mma_kernel(AttentionArgs a, int part, float* __restrict__ ws_out,
                      float* __restrict__ ws_max, float* __restrict__ ws_sum) {
  pdl_wait_then_release();
  constexpr int KS = D / 16;  // k-steps of S
  constexpr int OT = D / 8;   // n-tiles of O
  constexpr int KV = D / 32;  // 16-byte loads per K (or Q) row share
  constexpr int VV = D / 64;  // 16-byte loads per V row share
  constexpr int DQ = D / 4;   // dims per lane of a K / Q / O row
  constexpr int DV = D / 8;   // dims per lane of a V row
  constexpr int LDO = D + 1;  // padded row of the merge buffer
  __shared__ float s_o[kWarps][16][LDO];
  __shared__ float s_m[kWarps][16], s_l[kWarps][16];

  const int kvh = blockIdx.x, seq = blockIdx.y, split = blockIdx.z, nsplits = gridDim.z;
  const int G = a.num_heads / a.num_kv_heads;
  const int h0 = kvh * G;
  const int ctx = a.context_lens[seq];
  const int first = a.sliding_window > 0 ? max(0, ctx - a.sliding_window) : 0;
  const int start = first + split * part;
  if (start >= ctx && !(ctx == 0 && split == 0)) return;  // past this sequence's end
  const int end = min(start + part, ctx);
  const int own_splits = max(1, (ctx - first + part - 1) / part);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t tok = a.query_start_loc[seq];
  const int64_t qstride = static_cast<int64_t>(a.num_heads) * D;

  // Q rows g and g + 8 (heads h0 + g, h0 + g + 8; zero past the group).
  // The A fragments of Q, the same for every warp: built by warp 0 into
  // shared memory (kept out of registers for the bound of 3 CTAs an SM).
  __shared__ uint4 s_qf[KS][32];
  if (warp == 0) {
    uint4 qv[2][KV];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      const T* qp =
          static_cast<const T*>(a.q) + tok * qstride + static_cast<int64_t>(h0 + row) * D + t * DQ;
#pragma unroll
      for (int i = 0; i < KV; ++i)
        qv[r][i] = row < G ? reinterpret_cast<const uint4*>(qp)[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      // dims 4ks, 4ks+1 are word 2ks of the lane's share; 4ks+2, +3 word 2ks+1.
      s_qf[ks][lane] = make_uint4(word(qv[0][(2 * ks) / 4], (2 * ks) % 4),
                                  word(qv[1][(2 * ks) / 4], (2 * ks) % 4),
                                  word(qv[0][(2 * ks + 1) / 4], (2 * ks + 1) % 4),
                                  word(qv[1][(2 * ks + 1) / 4], (2 * ks + 1) % 4));
    }
  }
  __syncthreads();
  float slope[2] = {0.f, 0.f};
  if constexpr (TR)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      slope[r] = a.alibi != nullptr && g + 8 * r < G ? a.alibi[h0 + g + 8 * r] : 0.f;

  const T* __restrict__ kc = static_cast<const T*>(a.k_cache);
  const T* __restrict__ vc = static_cast<const T*>(a.v_cache);
  const int32_t* __restrict__ bt =
      a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, Hk = a.num_kv_heads;
  const auto row_of = [&](int key) -> int64_t {
    return ((static_cast<int64_t>(bt[key / bs]) * bs + key % bs) * Hk + kvh) * D;
  };

  float o[OT][4];
#pragma unroll
  for (int j = 0; j < OT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  // Scores enter the log2 domain as s·sc: scale·log2(e) folded into the
  // exponent's FFMA, or (TR) the transformed score already there (sc = 1).
  const float sc = TR ? 1.f : a.scale * kLog2e;

  for (int base = start + warp * kBlock; base < end; base += kWarps * kBlock) {
    // K: keys base + g (n-tile 0) and base + 8 + g (n-tile 1), dims of quad t.
    uint4 kv[2][KV];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int key = base + 8 * n + g;
      if (key < end) {
        const uint4* p = reinterpret_cast<const uint4*>(kc + row_of(key) + t * DQ);
#pragma unroll
        for (int i = 0; i < KV; ++i) kv[n][i] = __ldg(p + i);
      } else {
#pragma unroll
        for (int i = 0; i < KV; ++i) kv[n][i] = make_uint4(0, 0, 0, 0);
      }
    }
    // V: keys base + {2t, 2t+1, 2t+8, 2t+9}, dims of group g.
    uint4 vv[4][VV];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = base + 2 * t + (e & 1) + 8 * (e >> 1);
      if (key < end) {
        const uint4* p = reinterpret_cast<const uint4*>(vc + row_of(key) + g * DV);
#pragma unroll
        for (int i = 0; i < VV; ++i) vv[e][i] = __ldg(p + i);
      } else {
#pragma unroll
        for (int i = 0; i < VV; ++i) vv[e][i] = make_uint4(0, 0, 0, 0);
      }
    }

    // S (16 heads × 16 keys): s[n][0..1] row g keys 8n + 2t + {0,1}; [2..3] row g + 8.
    float s[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const uint4 qv = s_qf[ks][lane];
      const uint32_t qa[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
      for (int n = 0; n < 2; ++n)
        mma16816<T>(s[n], qa, word(kv[n][(2 * ks) / 4], (2 * ks) % 4),
                    word(kv[n][(2 * ks + 1) / 4], (2 * ks + 1) % 4));
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = base + 8 * n + 2 * t + (e & 1);
        float v = s[n][e];
        if constexpr (TR) {
          v *= a.scale;
          if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
          v = (v + slope[e >> 1] * static_cast<float>(key)) * kLog2e;
        }
        s[n][e] = key < end ? v : -INFINITY;
      }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    // Every block holds at least its first key (base < end), so the max is
    // finite (sc > 0).
    float corr[2], rs[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mn = fmaxf(m[r], mx[r] * sc);
      corr[r] = ex2_ftz(m[r] - mn);  // m = -inf on the warp's first block: 0
      m[r] = mn;
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = ex2_ftz(fmaf(s[n][e], sc, -m[e >> 1]));
        rs[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = l[r] * corr[r] + rs[r];  // quad-partial sums
    uint32_t pa[4];
    pa[0] = pack2<T>(s[0][0], s[0][1]);
    pa[1] = pack2<T>(s[0][2], s[0][3]);
    pa[2] = pack2<T>(s[1][0], s[1][1]);
    pa[3] = pack2<T>(s[1][2], s[1][3]);
#pragma unroll
    for (int j = 0; j < OT; ++j) {
      o[j][0] *= corr[0];
      o[j][1] *= corr[0];
      o[j][2] *= corr[1];
      o[j][3] *= corr[1];
      // dim g·DV + j of keys 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1): element j of
      // each key's share; word j / 2, low (even j) or high half.
      const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
      const int w = j / 2;
      const uint32_t b0 = __byte_perm(word(vv[0][w / 4], w % 4), word(vv[1][w / 4], w % 4), sel);
      const uint32_t b1 = __byte_perm(word(vv[2][w / 4], w % 4), word(vv[3][w / 4], w % 4), sel);
      mma16816<T>(o[j], pa, b0, b1);
    }
  }

  // Merge the warps: row sums across the quad, then through shared memory.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (t == 0) {
      s_m[warp][row] = m[r];
      s_l[warp][row] = l[r];
    }
#pragma unroll
    for (int j = 0; j < OT; ++j) {
      s_o[warp][row][(2 * t) * DV + j] = o[j][2 * r];
      s_o[warp][row][(2 * t + 1) * DV + j] = o[j][2 * r + 1];
    }
  }
  __syncthreads();
  const int gc = min(G, 16);
  for (int e = tid; e < gc * D; e += blockDim.x) {
    const int row = e / D, d = e % D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_m[w][row]);
    float num = 0.f, den = 0.f;  // fixed order: bitwise reproducible
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float c = exp2f(s_m[w][row] - M);  // a warp with no keys: 0
        num += c * s_o[w][row][d];
        den += c * s_l[w][row];
      }
    }
    store_partition<T, D>(a, tok, seq, h0 + row, split, nsplits, own_splits, d, den > 0.f ? num / den : 0.f, M,
                          den, ws_out, ws_max, ws_sum);
  }
}

}  // namespace

bool decode_attention_mma_applies(DType dt, const AttentionArgs& a) {
  return (dt == DType::BF16 || dt == DType::F16) && (a.head_dim == 64 || a.head_dim == 128) &&
         a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
         a.num_heads / a.num_kv_heads <= 16;
}

void launch_decode_attention_mma(DType dt, const AttentionArgs& a, int part, int nsplits,
                                 float* ws_out, float* ws_max, float* ws_sum, cudaStream_t stream) {
  const dim3 grid(a.num_kv_heads, a.num_seqs, nsplits);
  const bool tr = a.softcap > 0.f || a.alibi != nullptr || !(a.scale > 0.f);
  const auto go = [&](auto t_tag, auto d_tag) {
    using T = decltype(t_tag);
    constexpr int D = decltype(d_tag)::value;
    const auto k = tr ? decode_mma_kernel<T, D, true> : decode_mma_kernel<T, D, false>;
    launch_pdl(k, grid, kWarps * 32, 0, stream, a, part, ws_out, ws_max, ws_sum);
  };
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  if (dt == DType::BF16) {
    if (a.head_dim == 64)
      go(__nv_bfloat16{}, D64{});
    else
      go(__nv_bfloat16{}, D128{});
  } else {
    if (a.head_dim == 64)
      go(__half{}, D64{});
    else
      go(__half{}, D128{});
  }
  PAGODA_CUDA_CHECK_LAUNCH("decode_mma_kernel");
}

}  // namespace pagoda::cuda
