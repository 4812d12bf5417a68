// HostBlockPool: the bookkeeping of the host (CPU) KV blocks of the swap
// space (vLLM v0's CPU block allocator under BlockSpaceManager: --swap-space
// GiB of host memory / bytes per block). A sequence preempted by swap gets
// one host block per device block it held (Scheduler: vLLM v0's
// _preempt_by_swap / BlockSpaceManager.swap_out); swap-in frees them
// (_swap_in / swap_in). Host blocks are never shared, so they carry no
// reference counts; the memory itself belongs to the backend
// (Backend::alloc_host_kv_cache). Not thread-safe: the engine thread owns it.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv/block_manager.h"

namespace pagoda {

class HostBlockPool {
 public:
  // num_blocks >= 0 (0: no swap space; every allocate() of blocks fails);
  // throws std::invalid_argument when negative.
  explicit HostBlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_blocks_ - num_free(); }
  // Fraction of the pool in use, [0, 1] (0 for an empty pool).
  double usage() const;

  bool can_allocate(int64_t n) const { return n <= num_free(); }
  // n host block ids (lowest free ids first, so that a swapped sequence's
  // blocks tend to be consecutive). Throws std::runtime_error when
  // can_allocate(n) is false.
  BlockTable allocate(int64_t n);
  // Returns the table's blocks to the pool and clears it. Throws
  // std::logic_error for a block that is not in use.
  void free(BlockTable& table);
  bool in_use(int32_t b) const { return used_[static_cast<size_t>(b)] != 0; }

  // Checks that the free list holds exactly the blocks not in use, once
  // each. Throws std::logic_error naming the first violation.
  void check_invariants() const;

 private:
  int64_t num_blocks_;
  std::vector<int32_t> free_;  // a stack: the lowest id on top
  std::vector<uint8_t> used_;  // [num_blocks]
};

}  // namespace pagoda
