// Paged attention for decode (one query token per sequence) over the paged
// KV cache [num_blocks, block_size, Hk, D] (vLLM, Kwon et al. 2023,
// arXiv:2309.06180), split over the context length (Flash-Decoding, Dao et
// al. 2023): each CTA takes one KV head, the GC query heads of its group that
// read it (GQA: the K/V loads are shared), one sequence and one partition of
// `part` tokens (decode_partition_for: 512, or down to 64 when the batch is
// too small to fill the GPU otherwise). Pass 1 computes the partition's scores into shared
// memory, then a per-head softmax, pass 2 accumulates p·V. With several
// partitions each CTA writes its normalised output, max and sum, and a
// combine kernel merges them: out = Σ l_i e^{m_i - M} o_i / Σ l_i e^{m_i - M}.
// A thread group of TG lanes loads one token's D elements with 16-byte
// vectors (coalesced); fp32 math.
// Both kernels and the tensor-core one (attention_decode_mma.cu) are
// launched with programmatic dependent launch (gpu/pdl.h).
// AttentionOptions (AttentionArgs): with a sliding window W the sequence's
// keys are those at positions [max(0, ctx - W), ctx) (the query sits at
// ctx - 1 and sees (ctx - 1 - W, ctx - 1]), and the partitions tile that
// range instead of [0, ctx); soft-capping and ALiBi transform each score
// s = q·k·scale as engine/cpu does (cap * tanh(s / cap), then
// + slope[h] * key position) before it enters the log2-domain softmax.
#include <stdexcept>
#include <string>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/decode_partition.cuh"
#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kPartition = 512;
constexpr int kWarps = 4;
constexpr int kUnroll = 4;

template <typename T, int D, int GC>
__global__ void __launch_bounds__(kWarps * 32)
decode_attention_kernel(AttentionArgs a, int part, float* __restrict__ ws_out, float* __restrict__ ws_max,
                        float* __restrict__ ws_sum) {
  pdl_wait_then_release();
  constexpr int VEC = (16 / static_cast<int>(sizeof(T))) < D ? 16 / static_cast<int>(sizeof(T)) : D;
  constexpr int TG = D / VEC;      // lanes per token
  constexpr int TPW = 32 / TG;     // tokens per warp per step
  constexpr int STEP = kWarps * TPW;
  static_assert(TG >= 1 && TG <= 32 && (TG & (TG - 1)) == 0, "head_dim/VEC must be 1..32, pow2");

  __shared__ float s_logits[GC][kPartition];
  __shared__ float s_acc[kWarps][GC][D];  // per-warp partials, summed in fixed order
  __shared__ float s_max[GC], s_sum[GC];

  const int G = a.num_heads / a.num_kv_heads;
  const int nchunks = (G + GC - 1) / GC;
  const int kvh = blockIdx.x / nchunks;
  const int chunk = blockIdx.x % nchunks;
  const int h0 = kvh * G + chunk * GC;
  const int gc = min(GC, G - chunk * GC);
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  const int nsplits = gridDim.z;
  const int ctx = a.context_lens[seq];
  const int first = a.sliding_window > 0 ? max(0, ctx - a.sliding_window) : 0;  // first key
  const int start = first + split * part;
  if (start >= ctx && !(ctx == 0 && split == 0)) return;  // past this sequence's end
  const int end = min(start + part, ctx);
  const int own_splits = max(1, (ctx - first + part - 1) / part);
  const int n = end - start;
  // Scores that need the raw q·k·scale (soft-capping, ALiBi) are moved to
  // the log2 domain after the transform; otherwise q carries log2(e).
  const bool transform = a.softcap > 0.f || a.alibi != nullptr;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gi = lane / TG, li = lane % TG;
  const int d0 = li * VEC;
  const int64_t tok = a.query_start_loc[seq];
  const int64_t qstride = static_cast<int64_t>(a.num_heads) * D;
  const T* __restrict__ q = static_cast<const T*>(a.q) + tok * qstride;
  const T* __restrict__ kc = static_cast<const T*>(a.k_cache);
  const T* __restrict__ vc = static_cast<const T*>(a.v_cache);
  const int32_t* __restrict__ bt = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int bs = a.block_size, Hk = a.num_kv_heads;


  // ---- pass 1: scores (log2 domain: q pre-scaled by scale * log2(e)) ----
  {
    float qr[GC][VEC];
    float slope[GC];
    const float qs = transform ? a.scale : a.scale * 1.4426950408889634f;
#pragma unroll
    for (int g = 0; g < GC; ++g) slope[g] = a.alibi != nullptr && g < gc ? a.alibi[h0 + g] : 0.f;
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      if (g < gc) {
        load_f32<T, VEC>(q + static_cast<int64_t>(h0 + g) * D + d0, qr[g]);
#pragma unroll
        for (int i = 0; i < VEC; ++i) qr[g][i] *= qs;
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) qr[g][i] = 0.f;
      }
    }
    for (int base = start + warp * TPW; base < end; base += STEP * kUnroll) {
      float kr[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * STEP + gi;
        if (t < end) {
          const int64_t blk = bt[t / bs];
          load_f32<T, VEC>(kc + ((blk * bs + t % bs) * Hk + kvh) * D + d0, kr[u]);
        } else {
#pragma unroll
          for (int i = 0; i < VEC; ++i) kr[u][i] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * STEP + gi;
#pragma unroll
        for (int g = 0; g < GC; ++g) {
          float s = 0.f;
#pragma unroll
          for (int i = 0; i < VEC; ++i) s += qr[g][i] * kr[u][i];
#pragma unroll
          for (int o = TG / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
          if (transform) {
            if (a.softcap > 0.f) s = a.softcap * tanhf(s / a.softcap);
            s = (s + slope[g] * static_cast<float>(t)) * 1.4426950408889634f;
          }
          if (li == 0 && t < end) s_logits[g][t - start] = s;
        }
      }
    }
  }
  __syncthreads();

  // ---- softmax over the partition, one warp per head ----
  for (int g = warp; g < gc; g += kWarps) {
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = fmaxf(m, s_logits[g][i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.f;
    for (int i = lane; i < n; i += 32) {
      const float p = exp2f(s_logits[g][i] - m);
      s_logits[g][i] = p;
      l += p;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) {
      s_max[g] = m;
      s_sum[g] = l;
    }
  }
  __syncthreads();

  // ---- pass 2: acc = Σ p · V ----
  {
    float acc[GC][VEC];
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[g][i] = 0.f;
    for (int base = start + warp * TPW; base < end; base += STEP * kUnroll) {
      float vr[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * STEP + gi;
        if (t < end) {
          const int64_t blk = bt[t / bs];
          load_f32<T, VEC>(vc + ((blk * bs + t % bs) * Hk + kvh) * D + d0, vr[u]);
        } else {
#pragma unroll
          for (int i = 0; i < VEC; ++i) vr[u][i] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * STEP + gi;
        if (t < end) {
#pragma unroll
          for (int g = 0; g < GC; ++g) {
            const float p = s_logits[g][t - start];
#pragma unroll
            for (int i = 0; i < VEC; ++i) acc[g][i] += p * vr[u][i];
          }
        }
      }
    }
    // Reduce over the token groups of the warp, then over warps.
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int i = 0; i < VEC; ++i)
#pragma unroll
        for (int o = TG; o < 32; o <<= 1) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
    if (gi == 0) {
#pragma unroll
      for (int g = 0; g < GC; ++g)
        if (g < gc)
#pragma unroll
          for (int i = 0; i < VEC; ++i) s_acc[warp][g][d0 + i] = acc[g][i];
    }
  }
  __syncthreads();

  for (int e = tid; e < gc * D; e += blockDim.x) {
    const int g = e / D, d = e % D;
    const float l = s_sum[g];
    float sum = 0.f;  // fixed order: results are bitwise reproducible
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += s_acc[w][g][d];
    store_partition<T, D>(a, tok, seq, h0 + g, split, nsplits, own_splits, d, l > 0.f ? sum / l : 0.f,
                          s_max[g], l, ws_out, ws_max, ws_sum);
  }
}

// One CTA of D threads per (query head, sequence): merges the partitions.
template <typename T, int D>
__global__ void decode_combine_kernel(AttentionArgs a, int part, int nsplits, const float* __restrict__ ws_out,
                                      const float* __restrict__ ws_max,
                                      const float* __restrict__ ws_sum) {
  pdl_wait_then_release();
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int ctx = a.context_lens[seq];
  const int first = a.sliding_window > 0 ? max(0, ctx - a.sliding_window) : 0;
  const int ns = (ctx - first + part - 1) / part;  // as decode_attention_kernel's own_splits
  if (ns <= 1) return;  // the attention kernel wrote this sequence's output directly
  const int64_t row0 = (static_cast<int64_t>(seq) * a.num_heads + h) * nsplits;
  float M = -INFINITY;
  for (int i = 0; i < ns; ++i) M = fmaxf(M, ws_max[row0 + i]);
  float num = 0.f, den = 0.f;
  for (int i = 0; i < ns; ++i) {
    const float w = ws_sum[row0 + i] * exp2f(ws_max[row0 + i] - M);
    num += w * ws_out[(row0 + i) * D + d];
    den += w;
  }
  const int64_t tok = a.query_start_loc[seq];
  T* o = static_cast<T*>(a.out) + (tok * a.num_heads + h) * static_cast<int64_t>(D);
  o[d] = from_f32<T>(den > 0.f ? num / den : 0.f);
}

int group_chunk(int G) { return G <= 1 ? 1 : G <= 2 ? 2 : G <= 4 ? 4 : 8; }

template <typename T, int D>
void launch_decode_d(const AttentionArgs& a, int part, int nsplits, float* ws_out, float* ws_max,
                     float* ws_sum, cudaStream_t stream) {
  const int G = a.num_heads / a.num_kv_heads;
  const int GC = group_chunk(G);
  const int nchunks = (G + GC - 1) / GC;
  const dim3 grid(a.num_kv_heads * nchunks, a.num_seqs, nsplits);
  const auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, kWarps * 32, 0, stream, a, part, ws_out, ws_max, ws_sum);
  };
  switch (GC) {
    case 1:
      go(decode_attention_kernel<T, D, 1>);
      break;
    case 2:
      go(decode_attention_kernel<T, D, 2>);
      break;
    case 4:
      go(decode_attention_kernel<T, D, 4>);
      break;
    default:
      go(decode_attention_kernel<T, D, 8>);
      break;
  }
  PAGODA_CUDA_CHECK_LAUNCH("decode_attention_kernel");
}

// The partitions' attention (the tensor-core kernel when `mma`, which the
// caller sets only where decode_attention_mma_applies), then their merge.
template <typename T, int D>
void run_d(DType dt, const AttentionArgs& a, bool mma, int part, int nsplits, float* ws_out,
           float* ws_max, float* ws_sum, cudaStream_t stream) {
  if (mma)
    launch_decode_attention_mma(dt, a, part, nsplits, ws_out, ws_max, ws_sum, stream);
  else
    launch_decode_d<T, D>(a, part, nsplits, ws_out, ws_max, ws_sum, stream);
  if (nsplits > 1) {
    launch_pdl(decode_combine_kernel<T, D>, dim3(a.num_heads, a.num_seqs), D, 0, stream, a, part,
               nsplits, static_cast<const float*>(ws_out), static_cast<const float*>(ws_max),
               static_cast<const float*>(ws_sum));
    PAGODA_CUDA_CHECK_LAUNCH("decode_combine_kernel");
  }
}

DecodeAttentionKernel g_decode_kernel = DecodeAttentionKernel::kAuto;

}  // namespace

bool attention_head_dim_supported(int d) {
  return d == 8 || d == 16 || d == 32 || d == 64 || d == 128;
}

int decode_partition_for(int num_seqs, int num_heads) {
  // num_seqs rounded up to the CUDA-graph capture sizes (1, 2, 4, then
  // multiples of 8): a batch replayed from a graph padded to that size and
  // the same batch run eagerly split alike, so they agree bit for bit.
  const int64_t bucket = num_seqs <= 1 ? 1 : num_seqs <= 2 ? 2 : num_seqs <= 4 ? 4 : (num_seqs + 7) / 8 * 8;
  const int64_t rows = bucket * num_heads;
  // PAGODA_DECODE_PART (64 / 128 / 256 / 512): one partition size for
  // every batch, for benchmarks.
  static const int forced = [] {
    const int v = std::atoi(bench_switch("PAGODA_DECODE_PART").c_str());
    return v == 64 || v == 128 || v == 256 || v == 512 ? v : 0;
  }();
  if (forced > 0) return forced;
  const int part = rows >= 256 ? 512 : rows >= 128 ? 256 : rows >= 64 ? 128 : 64;
  static_assert(kPartition == 512, "the largest partition must fit s_logits");
  return part;
}

size_t decode_workspace_floats(int num_seqs, int num_heads, int head_dim, int max_context_len) {
  const int part = decode_partition_for(num_seqs, num_heads);
  const size_t nsplits = std::max(1, (max_context_len + part - 1) / part);
  if (nsplits == 1) return 0;
  const size_t rows = static_cast<size_t>(num_seqs) * num_heads * nsplits;
  return rows * (static_cast<size_t>(head_dim) + 2);
}

void set_decode_attention_kernel(DecodeAttentionKernel k) { g_decode_kernel = k; }

void launch_decode_attention(DType dt, const AttentionArgs& a, float* workspace,
                             cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  if (!attention_head_dim_supported(a.head_dim))
    throw std::invalid_argument("attention: unsupported head_dim " + std::to_string(a.head_dim));
  const int part = decode_partition_for(a.num_seqs, a.num_heads);
  const int nsplits = std::max(1, (a.max_context_len + part - 1) / part);
  const size_t rows = static_cast<size_t>(a.num_seqs) * a.num_heads * nsplits;
  float* ws_out = workspace;
  float* ws_max = workspace + rows * a.head_dim;
  float* ws_sum = ws_max + rows;
  const bool mma =
      g_decode_kernel != DecodeAttentionKernel::kSimt && decode_attention_mma_applies(dt, a);
  PAGODA_DISPATCH_FLOAT(dt, "decode attention", {
    switch (a.head_dim) {
      case 8:
        run_d<scalar_t, 8>(dt, a, false, part, nsplits, ws_out, ws_max, ws_sum, stream);
        break;
      case 16:
        run_d<scalar_t, 16>(dt, a, false, part, nsplits, ws_out, ws_max, ws_sum, stream);
        break;
      case 32:
        run_d<scalar_t, 32>(dt, a, false, part, nsplits, ws_out, ws_max, ws_sum, stream);
        break;
      case 64:
        run_d<scalar_t, 64>(dt, a, mma, part, nsplits, ws_out, ws_max, ws_sum, stream);
        break;
      default:
        run_d<scalar_t, 128>(dt, a, mma, part, nsplits, ws_out, ws_max, ws_sum, stream);
        break;
    }
  });
}

}  // namespace pagoda::cuda
