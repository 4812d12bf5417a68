// The GPU sampling kernels of gpu/gpu_sampler.h (see there for the method).
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "engine/sample/device_sampling.h"
#include "gpu/cuda_check.h"

namespace pagoda::cuda {

// Kernel-side layout of the staged batch (gpu_sampler.cpp fills it).
struct IdBias {
  int32_t id;
  float bias;
};

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxTop = 20;
constexpr int kMaxCand = 1024;  // kept tokens sorted in shared memory for top_p
constexpr uint32_t kPromptBit = 0x80000000u;

// Order-preserving map of a float's bits to an unsigned key (-inf lowest).
__device__ __forceinline__ uint32_t ordered_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Philox4x32-10 (Salmon et al. 2011, Random123's constants).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const uint32_t lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

__device__ __forceinline__ float gumbel(uint64_t seed, int64_t i) {
  const uint4 r = philox4x32_10(
      make_uint4(static_cast<uint32_t>(i >> 2), static_cast<uint32_t>(i >> 34), 0u, 0u),
      make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
  const uint32_t w = (i & 3) == 0 ? r.x : (i & 3) == 1 ? r.y : (i & 3) == 2 ? r.z : r.w;
  const float u = (static_cast<float>(w >> 8) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
  return -logf(-logf(u));
}

template <typename V>
__device__ V block_sum(V v, V* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  V t = lane < kWarps ? smem[lane] : V(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

__device__ float block_max(float v, float* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? smem[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
  return t;
}

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// Arg-max with ties to the lowest index; every thread gets the result.
__device__ void block_argmax(float& v, int& idx, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (better(ov, oi, v, idx)) {
      v = ov;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  v = lane < kWarps ? sv[lane] : -INFINITY;
  idx = lane < kWarps ? si[lane] : INT_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (better(ov, oi, v, idx)) {
      v = ov;
      idx = oi;
    }
  }
}

// The host Sampler's penalties on one logit (engine/sample/sampler.cpp,
// apply_penalties), the same float operations in the same order.
__device__ __forceinline__ float penalize(float v, uint32_t c, const DeviceSampleRow& p) {
  if (c != 0u && p.repetition_penalty != 1.0f)
    v = v > 0.f ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
  const uint32_t oc = c & ~kPromptBit;
  if (oc != 0u && (p.frequency_penalty != 0.f || p.presence_penalty != 0.f))
    v = __fsub_rn(
        v, __fadd_rn(__fmul_rn(p.frequency_penalty, static_cast<float>(oc)), p.presence_penalty));
  return v;
}

struct Smem {
  float sv[kWarps];
  int si[kWarps];
  float sf[kWarps];
  uint32_t hist[256];
  uint32_t digit;
  uint32_t above;
  int ncand;
  float cv[kMaxCand];
  int ci[kMaxCand];
};

// Warp 0 finds, over hist[256] scanned from the top digit down, the digit
// whose inclusive suffix count first reaches `need`, and the count of the
// digits above it (s.digit, s.above). Every thread returns after a barrier.
__device__ void find_digit(uint32_t need, Smem& s) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    // Lane l owns digits 255 - 8l down to 255 - 8l - 7.
    uint32_t own = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) own += s.hist[255 - 8 * lane - j];
    uint32_t incl = own;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    const unsigned hit = __ballot_sync(0xffffffffu, incl >= need);
    const int first = hit ? __ffs(hit) - 1 : 31;
    if (lane == first) {
      uint32_t acc = incl - own;
      int d = 255 - 8 * lane;
      for (int j = 0; j < 7; ++j, --d) {
        if (acc + s.hist[d] >= need) break;
        acc += s.hist[d];
      }
      s.digit = static_cast<uint32_t>(d);
      s.above = acc;
    }
  }
  __syncthreads();
}

// Radix select: the k-th largest key of x_i / T among keys >= lo (k >= 1;
// at least k such keys): the largest K with count(lo <= key >= K) >= k.
// Four passes of 256-bin histograms, one shared atomic per distinct bin per
// warp (__match_any_sync).
__device__ uint32_t kth_largest_key(const float* x, int vocab, float inv_t, int k, uint32_t lo,
                                    Smem& s) {
  uint32_t prefix = 0, need = static_cast<uint32_t>(k);
  const int lane = threadIdx.x % 32;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t hi_mask = shift == 24 ? 0u : (0xFFFFFFFFu << (shift + 8));
    for (int b = threadIdx.x; b < 256; b += kThreads) s.hist[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += kThreads) {  // warp-uniform trip count
      const int i = base + static_cast<int>(threadIdx.x);
      uint32_t bin = 0xFFFFFFFFu;
      if (i < vocab) {
        const uint32_t key = ordered_key(x[i] * inv_t);
        if (key >= lo && (key & hi_mask) == (prefix & hi_mask)) bin = (key >> shift) & 255u;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 0xFFFFFFFFu && lane == __ffs(peers) - 1)
        atomicAdd(&s.hist[bin], static_cast<uint32_t>(__popc(peers)));
    }
    __syncthreads();
    find_digit(need, s);
    prefix |= s.digit << shift;
    need -= s.above;
    __syncthreads();
  }
  return prefix;
}

// Collects the tokens with key(x_i / T) >= lo (and not -inf) into s.cv/s.ci
// (values already divided by T); false when more than kMaxCand qualify.
__device__ bool gather(const float* x, int vocab, float inv_t, uint32_t lo, Smem& s) {
  if (threadIdx.x == 0) s.ncand = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float t = x[i] * inv_t;
    if (ordered_key(t) >= lo && t != -INFINITY) {
      const int at = atomicAdd(&s.ncand, 1);
      if (at < kMaxCand) {
        s.cv[at] = t;
        s.ci[at] = i;
      }
    }
  }
  __syncthreads();
  return s.ncand <= kMaxCand;
}

// Bitonic sort of s.cv/s.ci[0, n) (n <= kMaxCand) by (value desc, id asc);
// the tail up to the next power of two is padded with (-inf, INT_MAX).
__device__ void sort_candidates(int n, Smem& s) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += kThreads) {
    s.cv[i] = -INFINITY;
    s.ci[i] = INT_MAX;
  }
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += kThreads) {
        const int l = i ^ j;
        if (l > i) {
          const bool best_first = (i & k) == 0;
          if (better(s.cv[l], s.ci[l], s.cv[i], s.ci[i]) == best_first) {
            const float tv = s.cv[i];
            const int ti = s.ci[i];
            s.cv[i] = s.cv[l];
            s.ci[i] = s.ci[l];
            s.cv[l] = tv;
            s.ci[l] = ti;
          }
        }
      }
      __syncthreads();
    }
  }
}

// The host's top_p cut over the sorted candidates: keep the most likely
// first until the mass taken reaches target (at least one); the masses are
// exp(cv - m) in double. Warp 0: 32 consecutive candidates per lane, a scan
// of the lane sums, then one lane walks its chunk. total < 0: the target is
// top_p times the candidates' own mass (they are the whole kept set).
// Returns the count kept, or -1 when the candidates' mass never reaches the
// target (the cut lies beyond them). Every thread gets the result.
__device__ int top_p_cut(int n, float m, float top_p, double total, Smem& s) {
  __shared__ int result;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    constexpr int kChunk = kMaxCand / 32;
    double own = 0.0;
    for (int j = lane * kChunk; j < min(n, (lane + 1) * kChunk); ++j)
      own += exp(static_cast<double>(s.cv[j]) - static_cast<double>(m));
    double incl = own;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    const double all = __shfl_sync(0xffffffffu, incl, 31);
    const double target = static_cast<double>(top_p) * (total < 0.0 ? all : total);
    const unsigned hit = __ballot_sync(0xffffffffu, incl >= target && own > 0.0);
    if (lane == 0 && hit == 0u) result = -1;
    if (hit != 0u && lane == __ffs(hit) - 1) {
      double cum = incl - own;
      int j = lane * kChunk;
      const int end = min(n, (lane + 1) * kChunk);
      for (; j < end && cum < target; ++j)
        cum += exp(static_cast<double>(s.cv[j]) - static_cast<double>(m));
      result = j < 1 ? 1 : j;
    }
  }
  __syncthreads();
  return result;
}

// The exact top_p threshold key by bisection over key bits (32 passes):
// the largest K >= lo whose kept mass (keys >= K) still reaches top_p of the
// mass of keys >= lo (ties at K kept). Slow; only when the cut lies beyond
// the kMaxCand most likely tokens (a flat distribution).
__device__ uint32_t top_p_key_bisect(const float* x, int vocab, float inv_t, float m, uint32_t lo,
                                     float top_p, Smem& s) {
  float part = 0.f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float t = x[i] * inv_t;
    if (ordered_key(t) >= lo) part += __expf(t - m);
  }
  const float target = top_p * block_sum(part, s.sf);
  uint32_t key = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t cand = max(key | (1u << bit), lo);
    float c = 0.f;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float t = x[i] * inv_t;
      if (ordered_key(t) >= cand) c += __expf(t - m);
    }
    if (block_sum(c, s.sf) >= target) key |= (1u << bit);
  }
  return max(key, lo);
}

__global__ void __launch_bounds__(256)
    init_slots_kernel(const DeviceSlotInit* __restrict__ inits, const int32_t* __restrict__ ids,
                      uint32_t* __restrict__ counts, int vocab) {
  const DeviceSlotInit in = inits[blockIdx.x];
  uint32_t* c = counts + static_cast<int64_t>(in.slot) * vocab;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) c[i] = 0u;
  __syncthreads();
  for (int j = threadIdx.x; j < in.prompt_count; j += blockDim.x) {
    const int id = ids[in.prompt_begin + j];
    if (id >= 0 && id < vocab) atomicOr(c + id, kPromptBit);
  }
  for (int j = threadIdx.x; j < in.output_count; j += blockDim.x) {
    const int id = ids[in.output_begin + j];
    if (id >= 0 && id < vocab) atomicAdd(c + id, 1u);
  }
}

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* __restrict__ logits, int vocab,
                       const DeviceSampleRow* __restrict__ rows, const int32_t* __restrict__ ids,
                       const IdBias* __restrict__ bias, const uint32_t* __restrict__ mask_words,
                       uint32_t* __restrict__ counts, float* __restrict__ scratch,
                       int32_t* __restrict__ out_id,
                       float* __restrict__ out_lp, int32_t* __restrict__ out_top_id,
                       float* __restrict__ out_top_lp, int32_t* __restrict__ out_rank) {
  __shared__ Smem s;
  const int r = blockIdx.x;
  const DeviceSampleRow p = rows[r];
  const float* x = logits + static_cast<int64_t>(p.src_row) * vocab;

  // 0. Raw logprobs.
  float lse = 0.f;
  if (p.logprobs >= 0) {
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < vocab; i += kThreads) mx = fmaxf(mx, x[i]);
    mx = block_max(mx, s.sf);
    float sum = 0.f;
    for (int i = threadIdx.x; i < vocab; i += kThreads) sum += __expf(x[i] - mx);
    lse = mx + logf(block_sum(sum, s.sf));
    const int k = min(min(p.logprobs, kMaxTop), vocab);
    float pv = INFINITY;
    int pi = -1;
    for (int j = 0; j < k; ++j) {
      float bv = -INFINITY;
      int bi = INT_MAX;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float v = x[i];
        if ((v < pv || (v == pv && i > pi)) && better(v, i, bv, bi)) {
          bv = v;
          bi = i;
        }
      }
      block_argmax(bv, bi, s.sv, s.si);
      if (bi == INT_MAX) {  // only -inf left after the previous pick: lowest id after it
        bi = pi + 1;
        bv = -INFINITY;
      }
      if (threadIdx.x == 0) {
        out_top_id[r * kMaxTop + j] = bi;
        out_top_lp[r * kMaxTop + j] = bv - lse;
      }
      pv = bv;
      pi = bi;
    }
  }

  // A score row (prompt logprobs): the given token's raw logprob and rank
  // (ids whose logit is >= its own; log-softmax keeps the order), no draw.
  if (p.score_token >= 0) {
    const float own = x[p.score_token];
    int at_least = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) at_least += x[i] >= own ? 1 : 0;
    at_least = block_sum(at_least, s.si);
    if (threadIdx.x == 0) {
      out_id[r] = p.score_token;
      out_lp[r] = own - lse;
      out_rank[r] = at_least;
    }
    return;
  }

  // 1-4. Allowed ids, bans, logit_bias, penalties into the scratch row.
  const float* v = x;
  const bool transform =
      p.allow_count > 0 || p.ban_count > 0 || p.bias_count > 0 || p.slot >= 0 || p.mask_begin >= 0;
  if (transform) {
    float* o = scratch + static_cast<int64_t>(r) * vocab;
    const uint32_t* c = p.slot >= 0 ? counts + static_cast<int64_t>(p.slot) * vocab : nullptr;
    // Guided decoding: the row's allowed-token bitmask (host-built, EOS
    // included where allowed); ids with a clear bit get -inf, like ids
    // outside allowed_token_ids (both: the intersection).
    const uint32_t* gm = p.mask_begin >= 0 ? mask_words + p.mask_begin : nullptr;
    auto guided_ok = [gm](int id) { return gm == nullptr || ((gm[id >> 5] >> (id & 31)) & 1u) != 0u; };
    const bool masked = p.allow_count > 0;
    const bool fuse_pen = p.bias_count == 0;  // penalties right away when no bias comes first
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      float t = masked || !guided_ok(i) ? -INFINITY : x[i];
      if (fuse_pen && c && !masked && guided_ok(i)) t = penalize(t, c[i], p);
      o[i] = t;
    }
    __syncthreads();
    if (masked) {
      for (int j = threadIdx.x; j < p.allow_count; j += kThreads) {
        const int id = ids[p.allow_begin + j];
        if (id >= 0 && id < vocab && guided_ok(id))
          o[id] = (fuse_pen && c) ? penalize(x[id], c[id], p) : x[id];
      }
      __syncthreads();
    }
    if (!fuse_pen) {
      if (threadIdx.x == 0)  // in order, as the host adds them
        for (int j = 0; j < p.bias_count; ++j) {
          const IdBias b = bias[p.bias_begin + j];
          if (b.id >= 0 && b.id < vocab) o[b.id] = __fadd_rn(o[b.id], b.bias);
        }
      __syncthreads();
      if (c) {
        for (int i = threadIdx.x; i < vocab; i += kThreads) o[i] = penalize(o[i], c[i], p);
        __syncthreads();
      }
    }
    for (int j = threadIdx.x; j < p.ban_count; j += kThreads) {
      const int id = ids[p.ban_begin + j];
      if (id >= 0 && id < vocab) o[id] = -INFINITY;
    }
    __syncthreads();
    v = o;
  }

  // 5. Greedy arg-max (also the fallback of an empty kept set).
  float best = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float t = v[i];
    if (better(t, i, best, bi)) {
      best = t;
      bi = i;
    }
  }
  block_argmax(best, bi, s.sv, s.si);
  // Nothing allowed (every logit -inf after the masks): the row's empty_id,
  // with no draw (the host Sampler: 0, or a guided row's first EOS id).
  const bool nothing_allowed = !(best > -INFINITY);
  int chosen = nothing_allowed ? p.empty_id : bi;
  if (p.temperature >= 1e-5f && !nothing_allowed) {
    const float inv_t = 1.0f / p.temperature;
    const float m = best * inv_t;
    uint32_t lo = 0;  // keep keys >= lo
    if (p.min_p > 0.f) lo = ordered_key(m + logf(p.min_p));
    if (p.top_k > 0 && p.top_k < vocab)
      lo = max(lo, kth_largest_key(v, vocab, inv_t, p.top_k, 0u, s));
    // Few kept tokens (top_k, a peaked min_p): gathered, sorted for top_p.
    bool gathered =
        (lo > ordered_key(-INFINITY) || vocab <= kMaxCand) && gather(v, vocab, inv_t, lo, s);
    int keep = gathered ? s.ncand : 0;
    if (p.top_p < 1.f) {
      if (gathered) {
        if (keep > 1) {
          sort_candidates(keep, s);
          keep = top_p_cut(keep, m, p.top_p, -1.0, s);
        }
      } else {
        // Many kept: the cut usually falls among the kMaxCand most likely.
        float part = 0.f;
        for (int i = threadIdx.x; i < vocab; i += kThreads) {
          const float t = v[i] * inv_t;
          if (ordered_key(t) >= lo) part += __expf(t - m);
        }
        const double total = static_cast<double>(block_sum(part, s.sf));
        const uint32_t head = max(lo, kth_largest_key(v, vocab, inv_t, kMaxCand, lo, s));
        gathered = gather(v, vocab, inv_t, head, s);
        if (gathered) {
          keep = s.ncand;
          sort_candidates(keep, s);
          keep = top_p_cut(keep, m, p.top_p, total, s);
          gathered = keep > 0;
        }
        if (!gathered) lo = top_p_key_bisect(v, vocab, inv_t, m, lo, p.top_p, s);
      }
    }
    float bs = -INFINITY;
    int bsi = INT_MAX;
    if (gathered) {
      for (int j = threadIdx.x; j < keep; j += kThreads) {
        const float g = s.cv[j] + gumbel(p.seed, s.ci[j]);
        if (better(g, s.ci[j], bs, bsi)) {
          bs = g;
          bsi = s.ci[j];
        }
      }
    } else {
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float t = v[i] * inv_t;
        if (ordered_key(t) < lo || t == -INFINITY) continue;
        const float g = t + gumbel(p.seed, i);
        if (better(g, i, bs, bsi)) {
          bs = g;
          bsi = i;
        }
      }
    }
    block_argmax(bs, bsi, s.sv, s.si);
    if (bsi != INT_MAX) chosen = bsi;
  }
  // The sampled id's rank in the raw distribution (ids whose logit is >= its
  // own, as a score row's), reported beside the top k (vLLM).
  int rank = 0;
  if (p.logprobs >= 0) {
    const float own = x[chosen];
    for (int i = threadIdx.x; i < vocab; i += kThreads) rank += x[i] >= own ? 1 : 0;
    rank = block_sum(rank, s.si);
  }
  if (threadIdx.x == 0) {
    out_id[r] = chosen;
    if (p.logprobs >= 0) {
      out_lp[r] = x[chosen] - lse;
      out_rank[r] = rank;
    }
    // 6. The sampled id joins the row's penalty counts.
    if (p.slot >= 0) counts[static_cast<int64_t>(p.slot) * vocab + chosen] += 1u;
  }
}

}  // namespace

void launch_init_slots(const DeviceSlotInit* inits, int64_t n, const int32_t* ids, uint32_t* counts,
                       int64_t vocab, cudaStream_t stream) {
  if (n == 0) return;
  init_slots_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(inits, ids, counts,
                                                                  static_cast<int>(vocab));
  PAGODA_CUDA_CHECK_LAUNCH("init_slots_kernel");
}

void launch_sample_rows(const float* logits, int64_t vocab, const DeviceSampleRow* rows, int64_t n,
                        const int32_t* ids, const IdBias* bias, const uint32_t* mask_words,
                        uint32_t* counts, float* scratch,
                        int32_t* out_id, float* out_lp, int32_t* out_top_id, float* out_top_lp,
                        int32_t* out_rank, cudaStream_t stream) {
  if (n == 0) return;
  sample_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      logits, static_cast<int>(vocab), rows, ids, bias, mask_words, counts, scratch, out_id, out_lp, out_top_id,
      out_top_lp, out_rank);
  PAGODA_CUDA_CHECK_LAUNCH("sample_rows_kernel");
}

}  // namespace pagoda::cuda
