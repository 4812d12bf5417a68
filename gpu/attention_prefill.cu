// Causal attention for prefill, chunked prefill and mixed batches, reading
// K/V from the paged cache [num_blocks, block_size, Hk, D] (vLLM,
// arXiv:2309.06180), tiled as in FlashAttention-2 (Dao 2023,
// arXiv:2307.08691): a CTA owns kRows query rows and streams the keys
// 0..(its last row's position) through shared memory in tiles of kKeys,
// keeping a running max m, sum l and output acc per row (online softmax,
// Milakov & Gimelshein 2018); no [S, S] matrix is formed.
// GQA: a CTA's rows are the flattened (token, head) pairs of one KV head's
// group, so all G query heads share each K/V tile. Query token j of a
// sequence with qlen queries and context ctx sits at position
// ctx - qlen + j and sees keys 0..that position (chunked prefill: earlier
// context already in the cache). Each row is split over TPR threads holding
// DPT = D/TPR dimensions. fp32 math (CUDA cores; no tensor cores yet).
// AttentionOptions (AttentionArgs): a sliding window W masks keys at or
// below qpos - W (the CTA starts at its first row's first visible key, so
// a tile may leave a row with no visible key: the running max then stays
// -inf and the row's exponentials are taken against 0, giving p = 0, not
// NaN); soft-capping and ALiBi transform s = q·k·scale as engine/cpu does
// (cap * tanh(s / cap), then + slope[h] * key position) before the
// log2-domain softmax.
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kKeys = 32;

template <typename T, int D>
struct PrefillCfg {
  static constexpr int DPT = D < 32 ? D : 32;      // dims per thread
  static constexpr int TPR = D / DPT;              // threads per row
  static constexpr int ROWS = kThreads / TPR;      // rows per CTA
  static constexpr int PAD = DPT + 4;              // padded segment (bank spread)
  static constexpr int RS = TPR * PAD;             // shared row stride (floats)
  static constexpr int VEC = (16 / static_cast<int>(sizeof(T))) < DPT ? 16 / static_cast<int>(sizeof(T)) : DPT;
};

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
prefill_attention_kernel(AttentionArgs a) {
  using C = PrefillCfg<T, D>;
  constexpr int DPT = C::DPT, TPR = C::TPR, ROWS = C::ROWS, PAD = C::PAD, RS = C::RS, VEC = C::VEC;
  __shared__ __align__(16) float s_k[kKeys * RS];
  __shared__ __align__(16) float s_v[kKeys * RS];

  const int seq = blockIdx.z;
  const int kvh = blockIdx.y;
  const int G = a.num_heads / a.num_kv_heads;
  const int q0 = a.query_start_loc[seq];
  const int qlen = a.query_start_loc[seq + 1] - q0;
  const int ctx = a.context_lens[seq];
  const int row_base = blockIdx.x * ROWS;
  if (row_base >= qlen * G) return;  // whole CTA past this sequence's queries

  const int tid = threadIdx.x;
  const int part = tid % TPR;
  const int r = row_base + tid / TPR;
  const bool valid = r < qlen * G;
  const int j = valid ? r / G : qlen - 1;  // invalid rows mirror the last query
  const int g = r % G;
  const int qpos = ctx - qlen + j;
  const int last_row = min(row_base + ROWS, qlen * G) - 1;
  const int n_keys = ctx - qlen + last_row / G + 1;
  const int win = a.sliding_window;
  // The CTA's first row has the smallest position: no row sees a key before its window.
  const int key_lo = win > 0 ? max(0, ctx - qlen + row_base / G - win + 1) : 0;
  const bool transform = a.softcap > 0.f || a.alibi != nullptr;

  const int64_t qstride = static_cast<int64_t>(a.num_heads) * D;
  const int h = kvh * G + g;
  float qr[DPT];
  {
    const T* qp = static_cast<const T*>(a.q) + (q0 + j) * qstride + static_cast<int64_t>(h) * D +
                  part * DPT;
    // log2 domain, unless the score is transformed first (then after it)
    const float qs = transform ? a.scale : a.scale * 1.4426950408889634f;
#pragma unroll
    for (int c = 0; c < DPT / VEC; ++c) {
      float tmp[VEC];
      load_f32<T, VEC>(qp + c * VEC, tmp);
#pragma unroll
      for (int i = 0; i < VEC; ++i) qr[c * VEC + i] = tmp[i] * qs;
    }
  }
  float acc[DPT];
#pragma unroll
  for (int i = 0; i < DPT; ++i) acc[i] = 0.f;
  float m = -INFINITY, l = 0.f;
  const float slope = a.alibi != nullptr ? a.alibi[h] : 0.f;

  const T* __restrict__ kc = static_cast<const T*>(a.k_cache);
  const T* __restrict__ vc = static_cast<const T*>(a.v_cache);
  const int32_t* __restrict__ bt = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, Hk = a.num_kv_heads;
  constexpr int CHUNKS = kKeys * D / VEC;

  for (int k0 = key_lo; k0 < n_keys; k0 += kKeys) {
    // ---- load K and V tiles (zeros past n_keys) ----
    for (int c = tid; c < CHUNKS; c += kThreads) {
      const int kj = c / (D / VEC);
      const int dv = (c % (D / VEC)) * VEC;
      const int key = k0 + kj;
      float kt[VEC], vt[VEC];
      if (key < n_keys) {
        const int64_t blk = bt[key / bs];
        const int64_t off = ((blk * bs + key % bs) * Hk + kvh) * D + dv;
        load_f32<T, VEC>(kc + off, kt);
        load_f32<T, VEC>(vc + off, vt);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) kt[i] = vt[i] = 0.f;
      }
      float* kd = s_k + kj * RS + (dv / DPT) * PAD + dv % DPT;
      float* vd = s_v + kj * RS + (dv / DPT) * PAD + dv % DPT;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        kd[i] = kt[i];
        vd[i] = vt[i];
      }
    }
    __syncthreads();

    // ---- scores for this tile ----
    float s[kKeys];
#pragma unroll
    for (int kj = 0; kj < kKeys; ++kj) {
      const float4* kp = reinterpret_cast<const float4*>(s_k + kj * RS + part * PAD);
      float dot = 0.f;
      if constexpr (DPT % 4 == 0) {
#pragma unroll
        for (int i = 0; i < DPT / 4; ++i) {
          const float4 kv = kp[i];
          dot += qr[4 * i] * kv.x + qr[4 * i + 1] * kv.y + qr[4 * i + 2] * kv.z + qr[4 * i + 3] * kv.w;
        }
      } else {
        const float* kf = s_k + kj * RS + part * PAD;
#pragma unroll
        for (int i = 0; i < DPT; ++i) dot += qr[i] * kf[i];
      }
#pragma unroll
      for (int o = 1; o < TPR; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      const int key = k0 + kj;
      if (transform) {
        if (a.softcap > 0.f) dot = a.softcap * tanhf(dot / a.softcap);
        dot = (dot + slope * static_cast<float>(key)) * 1.4426950408889634f;
      }
      s[kj] = (key <= qpos && (win <= 0 || key > qpos - win)) ? dot : -INFINITY;
    }
    float mt = m;
#pragma unroll
    for (int kj = 0; kj < kKeys; ++kj) mt = fmaxf(mt, s[kj]);
    // Without a window mt is finite (key 0 <= qpos is in the first tile of
    // every row); with one a row may have seen no key yet (mt = -inf).
    const float mref = mt == -INFINITY ? 0.f : mt;
    const float corr = exp2f(m - mref);  // m = -inf: 0 (l and acc are 0 then)
    m = mt;
    l *= corr;
#pragma unroll
    for (int i = 0; i < DPT; ++i) acc[i] *= corr;
#pragma unroll
    for (int kj = 0; kj < kKeys; ++kj) {
      const float p = exp2f(s[kj] - mref);
      l += p;
      const float* vp = s_v + kj * RS + part * PAD;
      if constexpr (DPT % 4 == 0) {
#pragma unroll
        for (int i = 0; i < DPT / 4; ++i) {
          const float4 vv = reinterpret_cast<const float4*>(vp)[i];
          acc[4 * i] += p * vv.x;
          acc[4 * i + 1] += p * vv.y;
          acc[4 * i + 2] += p * vv.z;
          acc[4 * i + 3] += p * vv.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < DPT; ++i) acc[i] += p * vp[i];
      }
    }
    __syncthreads();
  }

  if (!valid) return;
  T* op = static_cast<T*>(a.out) + (q0 + j) * qstride + static_cast<int64_t>(h) * D + part * DPT;
  const float inv = 1.f / l;
#pragma unroll
  for (int c = 0; c < DPT / VEC; ++c) {
    float tmp[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) tmp[i] = acc[c * VEC + i] * inv;
    store_f32<T, VEC>(op + c * VEC, tmp);
  }
}

template <typename T, int D>
void launch_prefill_d(const AttentionArgs& a, cudaStream_t stream) {
  using C = PrefillCfg<T, D>;
  const int G = a.num_heads / a.num_kv_heads;
  const int tiles = (a.max_query_len * G + C::ROWS - 1) / C::ROWS;
  if (tiles == 0) return;
  const dim3 grid(tiles, a.num_kv_heads, a.num_seqs);
  prefill_attention_kernel<T, D><<<grid, kThreads, 0, stream>>>(a);
  PAGODA_CUDA_CHECK_LAUNCH("prefill_attention_kernel");
}

}  // namespace

void launch_prefill_attention(DType dt, const AttentionArgs& a, cudaStream_t stream) {
  if (launch_prefill_attention_mma(dt, a, stream)) return;
  launch_prefill_attention_simt(dt, a, stream);
}

void launch_prefill_attention_simt(DType dt, const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "prefill attention", {
    switch (a.head_dim) {
      case 8: launch_prefill_d<scalar_t, 8>(a, stream); break;
      case 16: launch_prefill_d<scalar_t, 16>(a, stream); break;
      case 32: launch_prefill_d<scalar_t, 32>(a, stream); break;
      case 64: launch_prefill_d<scalar_t, 64>(a, stream); break;
      case 128: launch_prefill_d<scalar_t, 128>(a, stream); break;
      default:
        throw std::invalid_argument("attention: unsupported head_dim " + std::to_string(a.head_dim));
    }
  });
}

}  // namespace pagoda::cuda
