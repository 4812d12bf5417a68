// CudaBackend's swap space (preemption by swap; vLLM's CacheEngine
// swap_in / swap_out over ops.swap_blocks) and block copies (copy_blocks):
// pinned host blocks, and
// cudaMemcpyAsync on the backend's stream per run of consecutive block
// pairs (block_runs), per layer and K/V, so a swap is ordered before the
// step's forward issued after it and overlaps nothing the host does.
#include <fmt/format.h>

#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace pagoda::cuda {

HostKVCache CudaBackend::alloc_host_kv_cache(int64_t num_layers, int64_t num_blocks,
                                             size_t block_bytes) {
  HostKVCache h{nullptr, num_layers, num_blocks, block_bytes};
  if (num_layers <= 0 || num_blocks <= 0 || block_bytes == 0) return h;
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, h.bytes(), cudaHostAllocDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it
    throw std::runtime_error(fmt::format(
        "cuda backend: cannot allocate {:.2f} GiB of pinned host memory for the swap space "
        "({}); lower --swap-space",
        static_cast<double>(h.bytes()) / (1 << 30), cudaGetErrorString(e)));
  }
  h.data = static_cast<std::byte*>(p);
  host_kv_.insert(p);
  return h;
}

void CudaBackend::free_host_kv_cache(HostKVCache& h) {
  if (h.data) {
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no copy still reads or writes it
    host_kv_.erase(h.data);
    PAGODA_CUDA_CHECK(cudaFreeHost(h.data));
  }
  h.data = nullptr;
}

void CudaBackend::swap(std::span<const LayerKVCache> device, const HostKVCache& host,
                       std::span<const BlockSwap> pairs, bool to_host) {
  for_each_swap_range(device, host, pairs, [&](std::byte* dev, std::byte* hst, size_t n) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(
        to_host ? static_cast<void*>(hst) : dev, to_host ? static_cast<void*>(dev) : hst, n,
        to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream_));
  });
}

void CudaBackend::swap_out(std::span<const LayerKVCache> device, const HostKVCache& host,
                           std::span<const BlockSwap> pairs) {
  check_swap("cuda backend: swap_out", device, host, pairs);
  swap(device, host, pairs, /*to_host=*/true);
}

void CudaBackend::swap_in(std::span<const LayerKVCache> device, const HostKVCache& host,
                          std::span<const BlockSwap> pairs) {
  check_swap("cuda backend: swap_in", device, host, pairs);
  swap(device, host, pairs, /*to_host=*/false);
}

void CudaBackend::copy_blocks(std::span<const LayerKVCache> caches,
                              std::span<const BlockCopy> copies) {
  check_block_copies("cuda backend: copy_blocks", caches, copies);
  // One device-to-device copy per block, layer and K/V: a step copies a few
  // blocks (one per sequence that continues a cached partial block).
  for_each_block_copy(caches, copies, [&](std::byte* dst, const std::byte* src, size_t n) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_));
  });
}

}  // namespace pagoda::cuda
