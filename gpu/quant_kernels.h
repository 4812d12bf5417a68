// Launchers of the packed int4 / int8 linear kernels (gpu/quant_linear.cu;
// layout: engine/quant/packed_linear.h). Internal to gpu/. Pointers are
// device pointers; act is F16 or BF16 (the activations' dtype); every
// launcher enqueues on `stream` and checks the launch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/tensor.h"

namespace pagoda::cuda {

// out[m, n] (row stride ldo, out_dt act or F32) = Σ_j x[m, j] · W[n, j]
// (+ bias[n], act) for 1 <= M <= 8, n < N rows of a packed linear: qweight
// [N, K*bits/32], scales / zeros [N, G], chunk_group [K / (128/bits)];
// x [M, K] in the rows' input order (act-order: already gathered).
void launch_qgemv(DType act, DType out_dt, int bits, const void* x, const uint32_t* qweight,
                  const float* scales, const uint8_t* zeros, const int32_t* chunk_group,
                  const void* bias, void* out, int64_t ldo, int64_t M, int64_t N, int64_t K,
                  int64_t G, cudaStream_t stream);

// w[n, perm[j]] (perm null: j) = scales[n, g] * (q[n, j] − zeros[n, g]) in
// act dtype (round to nearest) for N rows; w [N, K].
void launch_qdequant(DType act, int bits, const uint32_t* qweight, const float* scales,
                     const uint8_t* zeros, const int32_t* chunk_group, const int32_t* perm, void* w,
                     int64_t N, int64_t K, int64_t G, cudaStream_t stream);

// The same for 4-bit codes in the tensor-core layout (packed_linear.h,
// tile_int4) and 1 <= M <= 64: N % 16 == 0, K % 64 == 0. group_size > 0:
// chunk c's group is c * 32 / group_size (chunk_group unread); <= 0: act-order, chunk_group.
// The codes, scales, zeros and chunk_group must not be written by a kernel
// that may still be running on `stream`: they are read before the
// programmatic-launch wait (gpu/pdl.h). Likewise launch_qmv.
void launch_qmma(DType act, DType out_dt, const void* x, const uint32_t* tiles, const float* scales,
                 const uint8_t* zeros, const int32_t* chunk_group, int64_t group_size,
                 const void* bias, void* out, int64_t ldo, int64_t M, int64_t N, int64_t K,
                 int64_t G, cudaStream_t stream);

// The same for 1 <= M <= 8 (qmv_kernel, gpu/quant_decode.cu): one CTA per
// 16-feature row tile, its warps splitting K, the codes streamed through
// shared memory by cp.async. Same arguments and layout as launch_qmma
// (group_size <= 0: groups from chunk_group); std::invalid_argument on
// other shapes or dtypes, or when qmv_fits(K, G, group_size) is false.
void launch_qmv(DType act, DType out_dt, const void* x, const uint32_t* tiles, const float* scales,
                const uint8_t* zeros, const int32_t* chunk_group, int64_t group_size,
                const void* bias, void* out, int64_t ldo, int64_t M, int64_t N, int64_t K,
                int64_t G, cudaStream_t stream);

// True when launch_qmv can run a linear of K inputs in G groups of
// group_size (<= 0: from the chunk-group table): K % 64 == 0, a regular
// group_size a multiple of 32 that divides K (its steps never cross a
// group; a short last group is qmma's), and shared memory for the tile's
// [G][8] records and the chunk-group table.
bool qmv_fits(int64_t K, int64_t G, int64_t group_size);

// Attributes of the current device, read once per process (the first
// caller's device; tensor-parallel ranks run one GPU model): the dynamic
// shared memory a block may opt in to and the shared memory of an SM
// (bytes), and the SM count.
int smem_optin_limit();
int smem_per_sm();
int sm_count();

// The most rows of x (0, 8, 16, ... 64) launch_qmma can take for a linear of
// K input features in G groups: its shared memory (a tile's scales, zeros
// and per-group records, the chunk-group table, the warps' sums, which grow
// with the rows) at most the device's opt-in limit per block.
int64_t qmma_max_rows(int64_t K, int64_t G);
// qmma_max_rows(K, G) >= 32: the 4-bit codes of such a linear are kept in
// the tensor-core layout (decode batches of more rows than qmma_max_rows
// dequantize and run cuBLASLt).
bool qmma_fits(int64_t K, int64_t G);

// launch_qdequant for 4-bit codes in the tensor-core layout.
void launch_qdequant_tiled(DType act, const uint32_t* tiles, const float* scales,
                           const uint8_t* zeros, const int32_t* chunk_group, const int32_t* perm,
                           void* w, int64_t N, int64_t K, int64_t G, cudaStream_t stream);

// out[m, j] = x[m, perm[j]] for m < M, j < K (act dtype).
void launch_gather_cols(DType act, const void* x, const int32_t* perm, void* out, int64_t M,
                        int64_t K, cudaStream_t stream);

// Dummy packed weights: codes from a SplitMix64 hash of (seed, word index),
// scales 0.02 / std(q − zero) (weights of std ~0.02), zeros 2^(bits−1).
void launch_qfill_dummy(int bits, uint32_t* qweight, float* scales, uint8_t* zeros, int64_t N,
                        int64_t K, int64_t G, uint64_t seed, cudaStream_t stream);

}  // namespace pagoda::cuda
