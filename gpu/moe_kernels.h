// Launchers of the mixture-of-experts kernels (gpu/moe.cu), internal to
// gpu/: the device-side pipeline of CudaBackend::moe (gpu/cuda_moe.cpp), in
// the design of vLLM's fused_moe (csrc/moe/topk_softmax_kernels.cu,
// csrc/moe/moe_align_sum_kernels.cu, model_executor/layers/fused_moe/
// fused_moe.py) for the MoE MLP of Mixtral (arXiv:2401.04088) and Qwen2-MoE:
//
//   router logits [T, E] fp32 (cuBLASLt)
//   -> launch_moe_topk_softmax: topk_ids [T, k] I32, topk_weights [T, k] F32
//   -> launch_moe_align: the T*k token slots (slot t*k + j: token t's j-th
//      expert) sorted by expert into tiles of `tile_rows` slots, each tile
//      one expert's (sorted_ids, tile_expert, num_tiles on the device)
//   -> launch_moe_gemm (gate_up, rows of x gathered by slot / k)
//   -> silu_mul -> launch_moe_gemm (down, rows gathered by slot)
//      (both through launch_moe_gemv instead at T <= kMoeGemvMaxTokens)
//   -> launch_moe_combine: out[t] = Σ_j w[t, j] · y[t*k + j] (+ the shared
//      expert's sigmoid-gated output).
//
// Nothing here reads device results on the host or synchronizes: the grids
// depend only on (T, E, k, tile_rows) and the shapes, and the kernels read
// how many tiles are in use from device memory, so the whole op can be
// captured into a CUDA graph and replayed for any routing of T tokens.
// Pointers are device pointers; `dt` is the activations' and weights' dtype
// (F32, F16 or BF16). Every launcher enqueues on `stream`, checks the launch
// and returns at once; bad arguments throw std::invalid_argument.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/tensor.h"

namespace pagoda::cuda {

// The most experts a layer may have (the top-k kernel keeps a token's E
// probabilities in shared memory); the largest in use today is 256.
constexpr int64_t kMoeMaxExperts = 1024;

// Slots per tile of the grouped GEMM: 16 when the average expert gets few
// slots (decode-sized batches: less padding), 64 otherwise.
int moe_tile_rows(int64_t num_tokens, int64_t num_experts, int64_t top_k);

// The most tiles the align kernel can use for num_slots = T*k slots of E
// experts: Σ_e ceil(c_e / tile_rows) over the experts e with c_e > 0 slots,
// which is <= num_slots (each such expert has at least one slot per tile)
// and <= (num_slots + min(E, num_slots) * (tile_rows - 1)) / tile_rows.
// The grouped GEMM's grid is this many tiles, fixed for a given T.
int64_t moe_max_tiles(int64_t num_slots, int64_t num_experts, int tile_rows);

// Ints of `counts` scratch launch_moe_align needs for E experts.
int64_t moe_align_scratch_ints(int64_t num_experts);

// Per token t (HF's routing, engine/cpu/cpu_moe.cpp): p = softmax(logits[t])
// in fp32 (max-subtracted), the top_k largest in descending order (ties to
// the lower expert id), each divided by their sum when renormalize.
// logits [T, E] F32; topk_ids [T, top_k] I32; topk_weights [T, top_k] F32.
// 1 <= top_k <= E <= kMoeMaxExperts.
void launch_moe_topk_softmax(const float* logits, int64_t T, int64_t E, int64_t top_k,
                             bool renormalize, int32_t* topk_ids, float* topk_weights,
                             cudaStream_t stream);

// One CTA: counts the num_slots = T*k entries of topk_ids per expert, pads
// each expert's count up to a multiple of tile_rows, and writes
//  * sorted_ids [max_tiles * tile_rows]: expert 0's slots, then expert 1's,
//    ..., each expert's in ascending slot order (deterministic) and padded
//    with num_slots (no slot) to a whole number of tiles; entries past the
//    used tiles are num_slots too;
//  * tile_expert [max_tiles]: the expert of each used tile, -1 past them;
//  * num_tiles [1]: the tiles in use.
// Experts with no slot get no tile. Ids outside [0, E) are not placed.
// counts: moe_align_scratch_ints(E) ints of scratch. max_tiles must be
// moe_max_tiles(num_slots, E, tile_rows) (or more).
void launch_moe_align(const int32_t* topk_ids, int64_t num_slots, int64_t E, int tile_rows,
                      int64_t max_tiles, int32_t* sorted_ids, int32_t* tile_expert,
                      int32_t* num_tiles, int32_t* counts, cudaStream_t stream);

// The grouped GEMM over the tiles of launch_moe_align: for every slot s
// (< num_slots) in tile i (< *num_tiles) of expert e = tile_expert[i],
//   out[s, n] = Σ_j a[s / a_div, j] · w[e, n, j]   (n < N, j < K)
// in fp32, rounded once to dt. a [*, K] (x with a_div = top_k: token s / k;
// the activations with a_div = 1), w [E, N, K] (nn.Linear per expert), out
// [num_slots, N]. Grid: max_tiles x ceil(N / 64) CTAs; those past the used
// tiles return at once. bf16 / f16 with K % 8 == 0 and 16-byte aligned a and
// w run on tensor cores (mma.sync m16n8k16, fp32 accumulation, cp.async
// pipeline); F32 and any other shape on a CUDA-core kernel (fp32 FMA).
void launch_moe_gemm(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                     const int32_t* sorted_ids, const int32_t* tile_expert,
                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows, int64_t num_slots,
                     int64_t N, int64_t K, cudaStream_t stream);

// The tensor-core kernel alone (tests): returns false, launching nothing,
// where it does not apply (F32, K % 8, alignment).
bool launch_moe_gemm_mma(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                         const int32_t* sorted_ids, const int32_t* tile_expert,
                         const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                         int64_t num_slots, int64_t N, int64_t K, cudaStream_t stream);

// Decode-sized batches: at most this many tokens run the experts' linears
// on launch_moe_gemv (moe_use_gemv), more on the grouped GEMM. Why 4:
//  * a token picks an expert once, so an expert gets at most T slots: a
//    warp keeps <= T fp32 sums and reads <= T 16-byte input chunks (L1
//    hits) per 16-byte weight chunk from DRAM;
//  * measured on the H200 (pagoda_gpu_bench --only moe, Mixtral-8x7B's
//    experts, docs/PERFORMANCE.md 2026-12-03): gate_up / down at 97 / 80 %
//    of the copy bandwidth at T = 1 against the grouped GEMM's 56 / 25 %,
//    86 / 67 % against 55 / 45 % at T = 4, but 51 / 45 % against 55 / 53 %
//    at T = 8 (up to 6 slots an expert: the L1 re-reads cost);
//  * 4 is a decode CUDA-graph batch size (DecodeGraphs::capture_sizes: 1,
//    2, 4, then multiples of 8), so a batch and the graph batch it is
//    padded to are on the same side of the threshold and take the same
//    kernel (graph replays equal the eager op bit for bit: the GEMV's sum
//    for a slot does not depend on the other slots of the step).
constexpr int64_t kMoeGemvMaxTokens = 4;
bool moe_use_gemv(int64_t num_tokens);  // 1 <= num_tokens <= kMoeGemvMaxTokens

// The grouped GEMM of launch_moe_gemm (same arguments and result: for every
// slot s in tile i < *num_tiles of expert e = tile_expert[i],
// out[s, n] = Σ_j a[s / a_div, j] · w[e, n, j] in fp32, rounded once to dt)
// as an expert-indexed GEMV for decode-sized batches (gpu/moe_gemv.cu, in
// the manner of gpu/gemv.cu): grid ceil(N / 8) x max_tiles CTAs of 8 warps,
// one warp per output row n of the tile's expert streaming w[e, n, :] in
// 16-byte loads, dotted with the input rows of all of the tile's slots, so
// a weight row is read once per tile (once per step for an expert whose
// slots fill one tile: T <= tile_rows). max_tile_slots bounds the slots of
// one tile (T for the op: a token picks an expert once) and picks the
// kernel's registers (1, 2, 4 or 8 slots at a time; a tile with more slots
// is still right, its weight rows then read once per group). Tiles past *num_tiles return at
// once: the grid is fixed for a given T (CUDA graphs). Returns false,
// launching nothing, where it does not apply (dt not BF16 / F16, K % 8 != 0,
// a or w not 16-byte aligned, max_tiles > 65535); throws
// std::invalid_argument on bad shapes (tile_rows must be <= 64).
bool launch_moe_gemv(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                     const int32_t* sorted_ids, const int32_t* tile_expert,
                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows, int64_t num_slots,
                     int64_t max_tile_slots, int64_t N, int64_t K, cudaStream_t stream);

// out[t, h] = Σ_{j < top_k} topk_weights[t*k + j] · y[t*k + j, h]
//             (+ sigmoid(x[t] · shared_gate) · shared[t, h] when shared),
// summed in fp32 in that order (the CPU backend's) and rounded once.
// y [T*k, H]; x, shared, out [T, H]; shared_gate [H]; shared may be null
// (then x and shared_gate are not read). out must not alias x.
void launch_moe_combine(DType dt, const void* y, const float* topk_weights, int64_t top_k,
                        const void* shared, const void* x, const void* shared_gate, void* out,
                        int64_t T, int64_t H, cudaStream_t stream);

}  // namespace pagoda::cuda
