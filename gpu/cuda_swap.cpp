// CudaBackend's swap space (preemption by swap; vLLM's CacheEngine
// swap_in / swap_out over ops.swap_blocks) and block copies (copy_blocks):
// pinned host blocks, and
// cudaMemcpyAsync on the backend's stream per run of consecutive block
// pairs (block_runs), per layer and K/V, so a swap is ordered before the
// step's forward issued after it and overlaps nothing the host does; block
// copies in one kernel (launch_copy_blocks).
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels.h"

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
  if (copies.empty()) return;
  // One kernel for every pair, layer and K/V (launch_copy_blocks): a step
  // may continue a cached partial block for each of hundreds of sequences
  // (beam search: every beam of every prompt), which took one
  // cudaMemcpyAsync per block, layer and K/V before. The bases and pairs go
  // up in one pageable copy (staged by the driver before it returns, so the
  // host vector may go) into a buffer of this backend, ordered on stream_.
  const size_t bb = caches.front().k.nbytes() / static_cast<size_t>(caches.front().k.dim(0));
  bool uniform = bb % 16 == 0;
  for (const LayerKVCache& c : caches)
    uniform = uniform && c.k.nbytes() == caches.front().k.nbytes() &&
              c.v.nbytes() == c.k.nbytes() && c.k.dim(0) == caches.front().k.dim(0);
  if (!uniform) {  // per-copy fallback (no model here has such caches)
    for_each_block_copy(caches, copies, [&](std::byte* dst, const std::byte* src, size_t n) {
      PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_));
    });
    return;
  }
  const size_t nb = 2 * caches.size(), np = copies.size();
  std::vector<uint64_t> args(nb + np);  // bases, then the pairs as int32 (src, dst)
  for (size_t l = 0; l < caches.size(); ++l) {
    args[2 * l] = reinterpret_cast<uint64_t>(caches[l].k.data);
    args[2 * l + 1] = reinterpret_cast<uint64_t>(caches[l].v.data);
  }
  auto* pairs = reinterpret_cast<int32_t*>(args.data() + nb);
  for (size_t i = 0; i < np; ++i) {
    pairs[2 * i] = copies[i].src;
    pairs[2 * i + 1] = copies[i].dst;
  }
  const size_t bytes = args.size() * sizeof(uint64_t);
  if (bytes > copy_args_cap_) {  // not ensure_scratch: no captured graph reads this buffer
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    raw_free(copy_args_);
    copy_args_ = nullptr;
    copy_args_cap_ = 0;
    copy_args_ = raw_alloc(std::max<size_t>(bytes, 4096), "block copy arguments");
    copy_args_cap_ = std::max<size_t>(bytes, 4096);
  }
  PAGODA_CUDA_CHECK(
      cudaMemcpyAsync(copy_args_, args.data(), bytes, cudaMemcpyHostToDevice, stream_));
  const auto* dev = static_cast<const uint64_t*>(copy_args_);
  launch_copy_blocks(dev, static_cast<int>(nb), reinterpret_cast<const int32_t*>(dev + nb),
                     static_cast<int64_t>(np), bb, stream_);
}

}  // namespace pagoda::cuda
