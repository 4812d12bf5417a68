// BlockSwap: one KV block moved between the device cache and the host swap
// space (vLLM v0's blocks_to_swap_out / blocks_to_swap_in maps), and
// block_runs(), which groups a step's pairs into runs of consecutive device
// and host ids so that a backend copies each run as one range per layer and
// K/V (CUDA: one cudaMemcpyAsync instead of one per block).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

// Device block `device` <-> host block `host`, all layers' K and V.
struct BlockSwap {
  int32_t device = 0;
  int32_t host = 0;
  bool operator==(const BlockSwap&) const = default;
};

// A device block copied to another before the step runs, all layers' K
// and V (vLLM v0's blocks_to_copy): copy-on-write of a shared block, or a
// cached partially filled block that a new sequence continues
// (BlockManager::acquire_cached_partial).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

// `count` blocks from device block `device` and host block `host` on.
struct BlockRun {
  int32_t device = 0;
  int32_t host = 0;
  int32_t count = 0;
  bool operator==(const BlockRun&) const = default;
};

// Pairs in order, merged where both ids follow the previous pair's by one.
inline std::vector<BlockRun> block_runs(std::span<const BlockSwap> pairs) {
  std::vector<BlockRun> runs;
  for (const BlockSwap& p : pairs) {
    if (!runs.empty()) {
      BlockRun& r = runs.back();
      if (p.device == r.device + r.count && p.host == r.host + r.count) {
        ++r.count;
        continue;
      }
    }
    runs.push_back({p.device, p.host, 1});
  }
  return runs;
}

}  // namespace pagoda
