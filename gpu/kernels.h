// Launchers for the CUDA backend's kernels (internal to gpu/). Pointers are
// device pointers; dtype says what T is for act-typed buffers (F32/F16/BF16).
// Every launcher enqueues on `stream`, checks the launch and returns at once.
// Shapes follow engine/model/backend.h; each .cu file cites its algorithm.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/tensor.h"

namespace pagoda::cuda {

// out[t, :] = table[ids[t], :]; ids outside [0, V) give a zero row.
void launch_embedding(DType dt, const int32_t* ids, const void* table, void* out, int64_t T,
                      int64_t H, int64_t V, cudaStream_t stream);

// out = x / sqrt(mean(x^2) + eps) * w per row, fp32 math. x, out [T, H].
void launch_rms_norm(DType dt, const void* x, const void* w, float eps, void* out, int64_t T,
                     int64_t H, cudaStream_t stream);

// residual += x (rounded to dt); out = rms_norm(residual). out may alias x.
void launch_add_rms_norm(DType dt, const void* x, void* residual, const void* w, float eps,
                         void* out, int64_t T, int64_t H, cudaStream_t stream);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i]. gate_up [T, 2I].
void launch_silu_mul(DType dt, const void* gate_up, void* out, int64_t T, int64_t I,
                     cudaStream_t stream);

// Per-head RMSNorm in place of the q heads (weights q_w [D]) and k heads
// (k_w [D]) of qkv [T, (Hq+2Hk)*D]; v untouched. fp32 math (head_norm.cu).
void launch_head_rms_norm(DType dt, void* qkv, const void* q_w, const void* k_w, int64_t T, int Hq,
                          int Hk, int D, float eps, cudaStream_t stream);

// ---- ops of the wider model family (elementwise_ext.cu; engine/cpu's
// formulas, fp32 math, one rounding to dt) ----
// out[t, i] = gelu_tanh(gate_up[t, i]) * gate_up[t, I + i]. gate_up [T, 2I].
void launch_gelu_tanh_mul(DType dt, const void* gate_up, void* out, int64_t T, int64_t I,
                          cudaStream_t stream);
// x[e] *= s for n elements, in place.
void launch_scale(DType dt, void* x, int64_t n, float s, cudaStream_t stream);
// x[e] = cap * tanh(x[e] / cap) for n elements, in place (cap > 0).
void launch_softcap(DType dt, void* x, int64_t n, float cap, cudaStream_t stream);
// out[e] = gelu(x[e]): 0.5 x (1 + erf(x / sqrt 2)), or with tanh_approx
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may alias x.
void launch_gelu(DType dt, const void* x, void* out, int64_t n, bool tanh_approx,
                 cudaStream_t stream);
// y[e] += x[e] for n elements (sum rounded to dt).
void launch_add(DType dt, const void* x, void* y, int64_t n, cudaStream_t stream);
// LayerNorm per row of x [T, H]: out = (x - mean) / sqrt(var + eps) * w + b,
// var biased; w, b [H]. residual non-null: residual += x (rounded to dt)
// first and the norm is of the new residual. out may alias x.
void launch_layer_norm(DType dt, const void* x, void* residual, const void* w, const void* b,
                       float eps, void* out, int64_t T, int64_t H, cudaStream_t stream);

// KV block copies, all caches in one launch (vLLM's copy_blocks kernel):
// for each cache tensor c < num_bases (device address bases[c]: one layer's
// K or V, [num_blocks, block_bytes] bytes) and each pair p < num_pairs
// (pairs[2p] = src block, pairs[2p + 1] = dst block; bases and pairs in
// device memory), block dst of c becomes a copy of block src. block_bytes
// must be a multiple of 16 and pairs must not chain (no dst is another
// pair's src) — std::invalid_argument for the former; ids are the caller's
// to check (check_block_copies).
void launch_copy_blocks(const uint64_t* bases, int num_bases, const int32_t* pairs,
                        int64_t num_pairs, size_t block_bytes, cudaStream_t stream);

// out[l, :] = x[idx[l], :] for rows of row_bytes bytes; x has T rows
// (indices outside [0, T) give a zero row).
void launch_gather_rows(const void* x, const int32_t* idx, void* out, int64_t L,
                        int64_t row_bytes, int64_t T, cudaStream_t stream);

// out[t, n] += bias[n]; out [T, N] of out_dt, bias [N] of bias_dt.
void launch_add_bias(DType out_dt, DType bias_dt, void* out, const void* bias, int64_t T,
                     int64_t N, cudaStream_t stream);

// out[i] = (dst_dt) in[i] for n elements; float dtypes among themselves.
void launch_convert(DType src_dt, DType dst_dt, const void* in, void* out, int64_t n,
                    cudaStream_t stream);

// Fills n elements of dt with normal(mean, std) from a counter-based hash of
// (seed, index) (Box-Muller over SplitMix64), deterministic for a given seed.
void launch_fill_normal(DType dt, void* out, int64_t n, float mean, float std, uint64_t seed,
                        cudaStream_t stream);

// RoPE on q and k of qkv [T, (Hq+2Hk)*D] at positions, q to q_out
// [T, Hq*D], k and v to the caches [num_blocks, block_size, Hk, D] at
// slot_mapping (slots < 0 are skipped). Only the first R = rotary_dim
// values of each head rotate (rotate-half pairs (j, j + R/2), or with
// interleaved GPT-J's (2j, 2j+1)), the rest pass through; R = 0: no
// rotation (cos_sin unread, may be null). cos_sin [max_pos, R] F32
// (RopeTable in engine/model/backend.h); R even, 0 <= R <= D.
void launch_rope_and_cache(DType dt, const void* qkv, const float* cos_sin, int64_t max_pos,
                           const int32_t* positions, const int32_t* slot_mapping, int64_t T, int Hq,
                           int Hk, int D, int rotary_dim, bool interleaved, void* q_out,
                           void* k_cache, void* v_cache, cudaStream_t stream);

// GEMV out[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N], same dtype as x) for
// 1 <= M <= 8, bf16/f16 in, out in dtype or F32 (gemv.cu). Returns false
// (nothing launched) when it does not apply: F32, M > 8, K % 8, alignment.
// w must not be written by a kernel that may still be running on `stream`:
// the kernel reads its first weights before the programmatic-launch wait
// (gpu/pdl.h).
bool launch_gemv(DType in_dt, DType out_dt, const void* x, const void* w, const void* bias,
                 void* out, int64_t M, int64_t N, int64_t K, cudaStream_t stream);

// Skinny GEMM on tensor cores (skinny_gemm.cu, issue 14): out[M, N] = x[M,
// K] · w[N, K]ᵀ (+ bias[N], same dtype as x) for 1 <= M <=
// kSkinnyGemmMaxRows, bf16/f16 in, out in dtype or F32, fp32 accumulation;
// mma.sync with w's rows on the MMA's M side, streaming w once. Returns
// false (nothing launched) when it does not apply: F32, M out of range,
// K % 32, x or w not 16-byte aligned.
constexpr int64_t kSkinnyGemmMaxRows = 64;
bool launch_skinny_gemm(DType in_dt, DType out_dt, const void* x, const void* w, const void* bias,
                        void* out, int64_t M, int64_t N, int64_t K, cudaStream_t stream);

// Paged-attention problem shared by the decode and prefill kernels.
struct AttentionArgs {
  const void* q = nullptr;          // [T, Hq*D]
  const void* k_cache = nullptr;    // [num_blocks, block_size, Hk, D]
  const void* v_cache = nullptr;
  void* out = nullptr;              // [T, Hq*D]
  const int32_t* query_start_loc = nullptr;  // [B+1]
  const int32_t* context_lens = nullptr;     // [B]
  const int32_t* block_tables = nullptr;     // [B, max_blocks_per_seq]
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_context_len = 0;
  int max_blocks_per_seq = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  float scale = 1.f;
  // AttentionOptions (engine/model/backend.h), as engine/cpu applies them:
  // s = q·k·scale; s = softcap * tanh(s / softcap) when softcap > 0; then
  // s += alibi[h] * (key position) when alibi is non-null ([Hq] F32); a
  // query at position p sees keys (p - sliding_window, p] when
  // sliding_window > 0, else 0..p.
  int sliding_window = 0;
  float softcap = 0.f;
  const float* alibi = nullptr;
};

// Head dims the attention kernels are instantiated for.
bool attention_head_dim_supported(int head_dim);

// Decode (one query token per sequence, token i = sequence i), split over
// the context in partitions of decode_partition_for(num_seqs, num_heads)
// tokens (Flash-Decoding); workspace holds decode_workspace_floats(...)
// floats. With num_seqs rounded up to a CUDA-graph capture size (1, 2, 4,
// multiples of 8), the partition is 512 tokens when that x num_heads >= 256,
// else 256, 128 or 64 so that small batches still spread over the SMs; it
// never depends on context lengths, so a decode batch replayed from a
// captured graph (padded) and the same batch run eagerly compute alike.
int decode_partition_for(int num_seqs, int num_heads);
size_t decode_workspace_floats(int num_seqs, int num_heads, int head_dim, int max_context_len);
// Picks the partitions' kernel: the tensor-core one (attention_decode_mma.cu)
// where decode_attention_mma_applies, else the fp32 CUDA-core one.
void launch_decode_attention(DType dt, const AttentionArgs& a, float* workspace,
                             cudaStream_t stream);
// Which kernel launch_decode_attention may use, process-wide (tests and
// pagoda_gpu_bench compare the two; the engine never changes it): kAuto (the
// default) uses the tensor-core kernel where it applies, kSimt never.
enum class DecodeAttentionKernel { kAuto, kSimt };
void set_decode_attention_kernel(DecodeAttentionKernel k);
// The tensor-core decode kernel applies to bf16/f16, head_dim 64 or 128 and
// at most 16 query heads per KV head.
bool decode_attention_mma_applies(DType dt, const AttentionArgs& a);
// One CTA per (KV head, sequence, partition of `part` keys) into the
// partition workspace (ws_out [rows, D], ws_max / ws_sum [rows] for
// rows = num_seqs * num_heads * nsplits) or, for a sequence with one
// partition, straight into a.out; launch_decode_attention merges.
void launch_decode_attention_mma(DType dt, const AttentionArgs& a, int part, int nsplits,
                                 float* ws_out, float* ws_max, float* ws_sum, cudaStream_t stream);

// Any batch (prefill, chunked prefill, decode, mixed): causal attention of
// each sequence's queries (positions ctx-qlen .. ctx-1) over its cache.
// Uses the tensor-core kernel (attention_prefill_mma.cu) when it applies,
// else the fp32 CUDA-core kernel (all dtypes and head dims).
void launch_prefill_attention(DType dt, const AttentionArgs& a, cudaStream_t stream);
// Tensor-core path alone: bf16/f16 with head_dim 64 or 128; returns false
// (and launches nothing) otherwise.
bool launch_prefill_attention_mma(DType dt, const AttentionArgs& a, cudaStream_t stream);
// Query rows per CTA of the tensor-core prefill kernel, process-wide (tests
// and pagoda_gpu_bench compare them; the engine never changes it): kAuto
// takes 128 rows (k128RowsWarp32) when a sequence has at least kWideRows
// query rows (max_query_len x query heads per KV head), else 64. k64Rows: 4 warps of
// 16 rows; k128Rows: 8 warps of 16 rows; k128RowsWarp32: 4 warps of 32 rows
// (each K/V fragment serves two row tiles, as FlashAttention-2 does).
enum class PrefillAttentionTile { kAuto, k64Rows, k128Rows, k128RowsWarp32 };
constexpr int kWideRows = 1024;
void set_prefill_attention_tile(PrefillAttentionTile t);
// The fp32 CUDA-core kernel alone (tests compare both paths).
void launch_prefill_attention_simt(DType dt, const AttentionArgs& a, cudaStream_t stream);

}  // namespace pagoda::cuda
