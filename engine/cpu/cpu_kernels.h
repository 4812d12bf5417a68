// fp32 kernels of the CPU reference backend on raw row-major arrays. The
// Backend wrapper (cpu_backend.cpp) checks shapes; these only compute.
// Algorithms: RMSNorm (Zhang & Sennrich 2019), rotate-half RoPE (RoFormer,
// arXiv:2104.09864, HF transformers layout), paged causal attention with GQA
// (vLLM, arXiv:2309.06180) using a max-subtracted (stable) softmax, SwiGLU
// (Shazeer 2020).
#pragma once
#include <cstdint>

#include "engine/cpu/thread_pool.h"

namespace pagoda::cpu {

// out[t, n] = dot(x[t, :K], w[n, :K]) (+ bias[n]); x [T, K], w [N, K],
// out [T, N]. Parallel over blocks of rows of w.
void linear_f32(ThreadPool& pool, const float* x, const float* w, const float* bias, float* out,
                int64_t T, int64_t K, int64_t N);

// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w; x, out [T, H] (may alias).
void rms_norm_f32(const float* x, const float* w, float eps, float* out, int64_t T, int64_t H);

// Paged-attention metadata, host arrays (see engine/model/forward_batch.h).
struct PagedAttnArgs {
  const int32_t* positions;        // [T]
  const int32_t* query_start_loc;  // [B+1]
  const int32_t* block_tables;     // [B, max_blocks_per_seq]
  int64_t num_tokens, num_seqs, max_blocks_per_seq;
  int64_t block_size, num_blocks;
  int64_t num_heads, num_kv_heads, head_dim;
  int64_t max_context_len;
  float scale;
  // > 0: keys at positions > p - sliding_window only (HF's sliding window).
  int64_t sliding_window = 0;
  // > 0: scores capped as cap * tanh(s / cap) before the softmax (Gemma 2).
  float softcap = 0.0f;
  // Non-null: [Hq], score of head h at key position j += alibi[h] * j.
  const float* alibi = nullptr;
};

// out[t, h*D:(h+1)*D] for every token t and query head h; q, out [T, Hq*D];
// k_cache, v_cache [num_blocks, block_size, Hk, D]. Block ids must have been
// validated by the caller.
void paged_attention_f32(ThreadPool& pool, const PagedAttnArgs& a, const float* q,
                         const float* k_cache, const float* v_cache, float* out);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i]; gate_up [T, 2I], out [T, I].
void silu_mul_f32(const float* gate_up, float* out, int64_t T, int64_t I);

// out[t, i] = gelu_tanh(gate_up[t, i]) * gate_up[t, I + i] (GeGLU with
// PyTorch's tanh-approximate GELU); gate_up [T, 2I], out [T, I].
void gelu_tanh_mul_f32(const float* gate_up, float* out, int64_t T, int64_t I);

// Mixture-of-experts MLP on one token row x[H] into out[H] (see
// Backend::moe for the algorithm): router [E, H], gate_up [E, 2I, H],
// down [E, H, I]; shared_* null when there is no shared expert
// (shared_gate_up [2Is, H], shared_down [H, Is], shared_gate [H]).
struct MoeArgs {
  const float *router, *gate_up, *down;
  const float *shared_gate_up = nullptr, *shared_down = nullptr, *shared_gate = nullptr;
  int64_t hidden, num_experts, intermediate, shared_intermediate = 0;
  int64_t top_k;
  bool renormalize;
};
void moe_f32(ThreadPool& pool, const MoeArgs& a, const float* x, float* out, int64_t T);

// LayerNorm per row: out = (x - mean) / sqrt(var + eps) * w + b (biased
// variance); x, out [T, H] (may alias).
void layer_norm_f32(const float* x, const float* w, const float* b, float eps, float* out,
                    int64_t T, int64_t H);

// Rotary on the first rotary_dim values of a head (the rest copied):
// rotate-half pairs (j, j + rotary_dim/2), or with interleaved GPT-J's pairs
// (2j, 2j+1); cs = (cos[0..rotary_dim/2), sin[0..rotary_dim/2)).
void rope_partial_f32(const float* x, const float* cs, float* out, int64_t D, int64_t rotary_dim,
                      bool interleaved);

// Rotates one head vector x[D] in place-free fashion: out = x*cos + rotate_half(x)*sin,
// with cs = (cos[0..D/2), sin[0..D/2)).
void rope_rotate_f32(const float* x, const float* cs, float* out, int64_t D);

}  // namespace pagoda::cpu
