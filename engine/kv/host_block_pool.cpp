#include "engine/kv/host_block_pool.h"

#include <fmt/format.h>

#include <stdexcept>

namespace pagoda {

HostBlockPool::HostBlockPool(int64_t num_blocks) : num_blocks_(num_blocks) {
  if (num_blocks < 0)
    throw std::invalid_argument(fmt::format("HostBlockPool: {} blocks", num_blocks));
  used_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

double HostBlockPool::usage() const {
  return num_blocks_ > 0 ? static_cast<double>(num_used()) / static_cast<double>(num_blocks_) : 0.0;
}

BlockTable HostBlockPool::allocate(int64_t n) {
  if (!can_allocate(n))
    throw std::runtime_error(
        fmt::format("HostBlockPool::allocate: {} host blocks asked for, {} free", n, num_free()));
  BlockTable t;
  t.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    used_[static_cast<size_t>(b)] = 1;
    t.push_back(b);
  }
  return t;
}

void HostBlockPool::free(BlockTable& table) {
  for (int32_t b : table)
    if (b < 0 || b >= num_blocks_ || !used_[static_cast<size_t>(b)])
      throw std::logic_error(fmt::format("HostBlockPool::free: host block {} is not in use", b));
  // Back in reverse, so the table's first block is on top again.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    used_[static_cast<size_t>(*it)] = 0;
    free_.push_back(*it);
  }
  table.clear();
}

void HostBlockPool::check_invariants() const {
  std::vector<uint8_t> seen(static_cast<size_t>(num_blocks_), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks_)
      throw std::logic_error(fmt::format("HostBlockPool: free block {} out of range", b));
    if (seen[static_cast<size_t>(b)]++)
      throw std::logic_error(fmt::format("HostBlockPool: block {} twice in the free list", b));
    if (used_[static_cast<size_t>(b)])
      throw std::logic_error(fmt::format("HostBlockPool: block {} free and in use", b));
  }
  for (int64_t b = 0; b < num_blocks_; ++b)
    if (!seen[static_cast<size_t>(b)] && !used_[static_cast<size_t>(b)])
      throw std::logic_error(fmt::format("HostBlockPool: block {} neither free nor in use", b));
}

}  // namespace pagoda
