// Tensor-core prefill attention for bf16/f16 and head_dim 64/128: the same
// problem and row mapping as attention_prefill.cu (paged K/V, causal, GQA
// rows = flattened (token, head) pairs of one KV head, chunked prefill),
// computed as FlashAttention-2 (Dao 2023, arXiv:2307.08691) with
// mma.sync.m16n8k16 (fp32 accumulation): each of 4 warps owns 16 query rows;
// S = Q·Kᵀ for a 64-key tile stays in registers, the online softmax rescales
// the running output, and S's accumulator fragments are re-packed in place as
// the A operand of P·V (V's B fragments via ldmatrix.trans). K/V tiles are
// gathered from the paged cache into padded shared memory (row stride D+8
// elements: conflict-free fragment loads) by cp.async, double-buffered: the
// next tile is in flight while the current one is computed.
// AttentionOptions (AttentionArgs) as in attention_prefill.cu: sliding
// window mask (key > qpos - W; tiles start at the CTA's first visible key,
// rows with no visible key yet keep m = -inf and take exponentials against
// 0), soft-capping and ALiBi on the fp32 scores before the softmax.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/ptx.cuh"
#include "gpu/smem_optin.h"

namespace pagoda::cuda {
namespace {

// A CTA: W warps of 16 query rows each (W = 4, or 8 for batches with many
// rows: the K/V tile then serves twice the rows).
constexpr int kKeys = 64;           // keys per tile

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t& r0, uint32_t& r1, const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}

template <typename T, int D, int W>
__global__ void __launch_bounds__(W * 32)
prefill_mma_kernel(AttentionArgs a) {
  constexpr int kRows = 16 * W;  // query rows per CTA
  constexpr int LD = D + 8;  // padded smem row (elements)
  constexpr int KS = D / 16; // k-steps over head_dim
  constexpr int NT = kKeys / 8;
  constexpr int OT = D / 8;  // output n-tiles
  // Two buffers of the K and V tiles (dynamic: prefill_mma_smem_bytes): the
  // next tile's asynchronous copies run while this one is computed.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const s_kb = reinterpret_cast<T*>(smem_raw);  // [2][kKeys * LD]
  T* const s_vb = s_kb + 2 * kKeys * LD;           // [2][kKeys * LD]

  const int seq = blockIdx.z, kvh = blockIdx.y;
  const int G = a.num_heads / a.num_kv_heads;
  const int q0 = a.query_start_loc[seq];
  const int qlen = a.query_start_loc[seq + 1] - q0;
  const int ctx = a.context_lens[seq];
  const int nrows = qlen * G;
  const int row_base = blockIdx.x * kRows;
  if (row_base >= nrows) return;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int quad = lane / 4, qi = lane % 4;
  // This thread's two rows (quad and quad + 8 of the warp's 16).
  int tok[2], head[2], qpos[2];
  bool valid[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row_base + warp * 16 + quad + 8 * i;
    valid[i] = r < nrows;
    const int rr = valid[i] ? r : nrows - 1;  // mirror a real row: finite max
    tok[i] = rr / G;
    head[i] = kvh * G + rr % G;
    qpos[i] = ctx - qlen + tok[i];
  }
  const int last_row = min(row_base + kRows, nrows) - 1;
  const int n_keys = ctx - qlen + last_row / G + 1;
  const int win = a.sliding_window;
  const int key_lo = win > 0 ? max(0, ctx - qlen + row_base / G - win + 1) : 0;
  const bool transform = a.softcap > 0.f || a.alibi != nullptr;
  float slope[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) slope[i] = a.alibi != nullptr ? a.alibi[head[i]] : 0.f;

  const int64_t qstride = static_cast<int64_t>(a.num_heads) * D;
  const T* qp[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    qp[i] = static_cast<const T*>(a.q) + (q0 + tok[i]) * qstride + static_cast<int64_t>(head[i]) * D;
  uint32_t qf[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int d = ks * 16 + qi * 2;
    qf[ks][0] = *reinterpret_cast<const uint32_t*>(qp[0] + d);
    qf[ks][1] = *reinterpret_cast<const uint32_t*>(qp[1] + d);
    qf[ks][2] = *reinterpret_cast<const uint32_t*>(qp[0] + d + 8);
    qf[ks][3] = *reinterpret_cast<const uint32_t*>(qp[1] + d + 8);
  }

  float o[OT][4];
#pragma unroll
  for (int t = 0; t < OT; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float qs = a.scale * 1.4426950408889634f;

  const T* __restrict__ kc = static_cast<const T*>(a.k_cache);
  const T* __restrict__ vc = static_cast<const T*>(a.v_cache);
  const int32_t* __restrict__ bt = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, Hk = a.num_kv_heads;
  constexpr int VEC = 8;  // 16-byte chunks
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
        const int64_t blk = bt[key / bs];
        off = ((blk * bs + key % bs) * Hk + kvh) * D + dv;
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
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* const s_k = s_kb + buf * kKeys * LD;
    const T* const s_v = s_vb + buf * kKeys * LD;

    // S = Q Kᵀ (16 x 64 per warp).
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      const T* krow = s_k + (nt * 8 + quad) * LD + qi * 2;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + ks * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + ks * 16 + 8);
        mma16816<T>(s[nt], qf[ks], b0, b1);
      }
    }
    // Scale, causal mask, online softmax (rows quad and quad+8).
    float mt[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + qi * 2 + (e & 1);
        const int ri = e >> 1;
        float v;
        if (transform) {
          v = s[nt][e] * a.scale;
          if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
          v = (v + slope[ri] * static_cast<float>(key)) * 1.4426950408889634f;
        } else {
          v = s[nt][e] * qs;
        }
        const bool visible = key <= qpos[ri] && (win <= 0 || key > qpos[ri] - win);
        s[nt][e] = visible ? v : -INFINITY;
        mt[ri] = fmaxf(mt[ri], s[nt][e]);
      }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      mt[ri] = fmaxf(mt[ri], __shfl_xor_sync(0xffffffffu, mt[ri], 1));
      mt[ri] = fmaxf(mt[ri], __shfl_xor_sync(0xffffffffu, mt[ri], 2));
    }
    // mref: the max, or 0 while a row has seen no visible key (sliding
    // window), so that corr and p are 0 there instead of NaN.
    float corr[2], rs[2] = {0.f, 0.f}, mref[2];
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      mref[ri] = mt[ri] == -INFINITY ? 0.f : mt[ri];
      corr[ri] = exp2f(m[ri] - mref[ri]);  // m = -inf on the first tile: 0
      m[ri] = mt[ri];
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2f(s[nt][e] - mref[e >> 1]);
        rs[e >> 1] += s[nt][e];
      }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) l[ri] = l[ri] * corr[ri] + rs[ri];  // quad-partial sums
#pragma unroll
    for (int t = 0; t < OT; ++t) {
      o[t][0] *= corr[0];
      o[t][1] *= corr[0];
      o[t][2] *= corr[1];
      o[t][3] *= corr[1];
    }
    // O += P V: P's accumulators become A fragments (k-step j = n-tiles 2j, 2j+1).
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j) {
      uint32_t pa[4];
      pa[0] = pack2<T>(s[2 * j][0], s[2 * j][1]);
      pa[1] = pack2<T>(s[2 * j][2], s[2 * j][3]);
      pa[2] = pack2<T>(s[2 * j + 1][0], s[2 * j + 1][1]);
      pa[3] = pack2<T>(s[2 * j + 1][2], s[2 * j + 1][3]);
#pragma unroll
      for (int t = 0; t < OT; ++t) {
        uint32_t b0, b1;
        ldmatrix_x2_trans(b0, b1, s_v + (j * 16 + (lane % 16)) * LD + t * 8);
        mma16816<T>(o[t], pa, b0, b1);
      }
    }
    __syncthreads();
  }

  // Full row sums across the quad, normalise, store.
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
  }
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    if (!valid[ri]) continue;
    const float inv = 1.f / l[ri];
    T* op = static_cast<T*>(a.out) + (q0 + tok[ri]) * qstride + static_cast<int64_t>(head[ri]) * D + qi * 2;
#pragma unroll
    for (int t = 0; t < OT; ++t)
      *reinterpret_cast<uint32_t*>(op + t * 8) = pack2<T>(o[t][2 * ri] * inv, o[t][2 * ri + 1] * inv);
  }
}

// Dynamic shared memory of prefill_mma_kernel<T, D>: two K and two V tiles.
template <typename T, int D>
constexpr int prefill_mma_smem_bytes() {
  return 4 * kKeys * (D + 8) * static_cast<int>(sizeof(T));
}

template <typename T, int D, int W>
void launch_mma_dw(const AttentionArgs& a, cudaStream_t stream) {
  const int G = a.num_heads / a.num_kv_heads;
  const int tiles = (a.max_query_len * G + 16 * W - 1) / (16 * W);
  if (tiles == 0) return;
  constexpr int smem = prefill_mma_smem_bytes<T, D>();
  // Over 48 KB needs the opt-in, once per kernel and device.
  opt_in_dynamic_smem(reinterpret_cast<const void*>(prefill_mma_kernel<T, D, W>), smem);
  prefill_mma_kernel<T, D, W><<<dim3(tiles, a.num_kv_heads, a.num_seqs), W * 32, smem, stream>>>(a);
  PAGODA_CUDA_CHECK_LAUNCH("prefill_mma_kernel");
}

PrefillAttentionTile g_tile = PrefillAttentionTile::kAuto;

template <typename T, int D>
void launch_mma_d(const AttentionArgs& a, cudaStream_t stream) {
  const int G = a.num_heads / a.num_kv_heads;
  const bool wide = g_tile == PrefillAttentionTile::k128Rows ||
                    (g_tile == PrefillAttentionTile::kAuto && a.max_query_len * G >= kWideRows);
  if (wide)
    launch_mma_dw<T, D, 8>(a, stream);
  else
    launch_mma_dw<T, D, 4>(a, stream);
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
