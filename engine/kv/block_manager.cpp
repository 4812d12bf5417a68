#include "engine/kv/block_manager.h"

#include <stdexcept>
#include <string>

namespace pagoda {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    throw std::invalid_argument("BlockManager: num_blocks and block_size must be > 0 (got " +
                                std::to_string(num_blocks) + ", " + std::to_string(block_size) +
                                ")");
  ref_.assign(static_cast<size_t>(num_blocks), 0);
  for (int64_t b = 0; b < num_blocks; ++b) free_.push_back(static_cast<int32_t>(b));
}

int64_t BlockManager::blocks_for(int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + block_size_ - 1) / block_size_;
}

bool BlockManager::can_allocate(const BlockTable& table, int64_t num_tokens) const {
  int64_t missing = blocks_for(num_tokens) - static_cast<int64_t>(table.size());
  return missing <= num_free();
}

int32_t BlockManager::take_block() {
  int32_t b = free_.front();
  free_.pop_front();
  ref_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockManager::allocate(BlockTable& table, int64_t num_tokens) {
  if (!can_allocate(table, num_tokens))
    throw std::runtime_error("BlockManager::allocate: not enough free KV blocks");
  while (static_cast<int64_t>(table.size()) < blocks_for(num_tokens)) table.push_back(take_block());
}

bool BlockManager::can_append(const BlockTable& table, int64_t num_tokens) const {
  int64_t need = blocks_for(num_tokens) - static_cast<int64_t>(table.size());
  if (need > 0) return need <= num_free();
  // The slot lies in the last block: a shared one must be copied first.
  return table.empty() || ref_[static_cast<size_t>(table.back())] == 1 || num_free() >= 1;
}

std::optional<BlockCopy> BlockManager::append_slot(BlockTable& table, int64_t num_tokens) {
  if (!can_append(table, num_tokens))
    throw std::runtime_error("BlockManager::append_slot: no free KV block");
  if (blocks_for(num_tokens) > static_cast<int64_t>(table.size())) {
    allocate(table, num_tokens);
    return std::nullopt;
  }
  int32_t last = table.back();
  if (ref_[static_cast<size_t>(last)] == 1) return std::nullopt;
  // Copy on write: the last block is shared with another sequence.
  int32_t fresh = take_block();
  ref_[static_cast<size_t>(last)]--;
  table.back() = fresh;
  return BlockCopy{last, fresh};
}

BlockTable BlockManager::fork(const BlockTable& parent) {
  for (int32_t b : parent) ref_[static_cast<size_t>(b)]++;
  return parent;
}

void BlockManager::free(BlockTable& table) {
  for (int32_t b : table) {
    int32_t& r = ref_[static_cast<size_t>(b)];
    if (r <= 0) throw std::logic_error("BlockManager::free: block " + std::to_string(b) + " is not in use");
    if (--r == 0) free_.push_back(b);
  }
  table.clear();
}

}  // namespace pagoda
