// KV block copies in one launch (vLLM's copy_blocks kernel in
// csrc/cache_kernels.cu does the same per layer): one CTA per (pair, cache
// tensor) copies one block of one layer's K or V with 16-byte loads, so a
// step that continues 1,024 cached partial blocks (a beam-search step of 256
// prompts x 4 beams) issues one kernel instead of 1,024 x layers x 2
// cudaMemcpyAsync calls.
#include <cstdint>
#include <stdexcept>

#include "gpu/cuda_check.h"
#include "gpu/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kCopyThreads = 256;

__global__ void copy_blocks_kernel(const uint64_t* __restrict__ bases, const int32_t* __restrict__ pairs,
                                   int64_t block_vecs) {
  const int64_t pair = blockIdx.x;
  uint4* base = reinterpret_cast<uint4*>(bases[blockIdx.y]);
  const uint4* src = base + static_cast<int64_t>(pairs[2 * pair]) * block_vecs;
  uint4* dst = base + static_cast<int64_t>(pairs[2 * pair + 1]) * block_vecs;
  for (int64_t i = threadIdx.x; i < block_vecs; i += kCopyThreads) dst[i] = src[i];
}

}  // namespace

void launch_copy_blocks(const uint64_t* bases, int num_bases, const int32_t* pairs, int64_t num_pairs,
                        size_t block_bytes, cudaStream_t stream) {
  if (num_pairs <= 0 || num_bases <= 0) return;
  if (block_bytes % 16 != 0) throw std::invalid_argument("launch_copy_blocks: block bytes not a multiple of 16");
  if (num_bases > 65535 || num_pairs > 0x7fffffff) throw std::invalid_argument("launch_copy_blocks: grid too large");
  const dim3 grid(static_cast<unsigned>(num_pairs), static_cast<unsigned>(num_bases));
  copy_blocks_kernel<<<grid, kCopyThreads, 0, stream>>>(bases, pairs, static_cast<int64_t>(block_bytes / 16));
  PAGODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pagoda::cuda
