#include "engine/kv/block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace pagoda {
namespace {

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t BlockManager::root_for_salt(std::string_view salt) {
  if (salt.empty()) return kUnsaltedRoot;
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the bytes, then mixed
  for (char c : salt) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return mix64(mix64(h ^ kUnsaltedRoot) + salt.size());
}

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_caching)
    : num_blocks_(num_blocks), block_size_(block_size), caching_(enable_caching) {
  if (num_blocks <= 0 || block_size <= 0)
    throw std::invalid_argument("BlockManager: num_blocks and block_size must be > 0 (got " +
                                std::to_string(num_blocks) + ", " + std::to_string(block_size) +
                                ")");
  const auto n = static_cast<size_t>(num_blocks);
  ref_.assign(n, 0);
  prev_.assign(n, -1);
  next_.assign(n, -1);
  for (int64_t b = 0; b < num_blocks; ++b) push_free(static_cast<int32_t>(b));
  if (caching_) {
    has_.assign(n, 0);
    hash_.assign(n, 0);
    parent_.assign(n, 0);
    tokens_.assign(n * static_cast<size_t>(block_size), 0);
    plen_.assign(n, 0);
    pparent_.assign(n, 0);
  }
}

uint64_t BlockManager::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens)
    h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull));
  return h;
}

std::vector<uint64_t> BlockManager::prefix_hashes(uint64_t parent,
                                                  std::span<const int32_t> tokens) {
  // chain_hash's loop, keeping every step.
  std::vector<uint64_t> out;
  out.reserve(tokens.size());
  uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) {
    h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull));
    out.push_back(h);
  }
  return out;
}

std::span<const int32_t> BlockManager::recorded_tokens(size_t i) const {
  return {tokens_.data() + i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_)};
}

void BlockManager::push_free(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0)
    next_[static_cast<size_t>(tail_)] = b;
  else
    head_ = b;
  tail_ = b;
  ++num_free_;
}

void BlockManager::unlink_free(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (prev_[i] >= 0)
    next_[static_cast<size_t>(prev_[i])] = next_[i];
  else
    head_ = next_[i];
  if (next_[i] >= 0)
    prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else
    tail_ = prev_[i];
  prev_[i] = next_[i] = -1;
  --num_free_;
}

int64_t BlockManager::blocks_for(int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + block_size_ - 1) / block_size_;
}

bool BlockManager::can_allocate(const BlockTable& table, int64_t num_tokens) const {
  int64_t missing = blocks_for(num_tokens) - static_cast<int64_t>(table.size());
  return missing <= num_free();
}

int32_t BlockManager::take_block() {
  const int32_t b = head_;
  unlink_free(b);
  const auto i = static_cast<size_t>(b);
  forget_record(b);  // evicts its record
  if (caching_) drop_partial(b);
  ref_[i] = 1;
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
  for (int32_t b : parent)
    if (b != kNoBlock) ref_[static_cast<size_t>(b)]++;
  return parent;
}

void BlockManager::free(BlockTable& table) {
  std::erase(table, kNoBlock);
  for (int32_t b : table)
    if (ref_[static_cast<size_t>(b)] <= 0)
      throw std::logic_error("BlockManager::free: block " + std::to_string(b) + " is not in use");
  // Without caching, in table order (a FIFO of freed blocks); with it, last
  // block first, so the tail of a sequence is evicted before its prefix.
  const auto release = [&](int32_t b) {
    if (--ref_[static_cast<size_t>(b)] == 0) push_free(b);
  };
  if (caching_)
    std::for_each(table.rbegin(), table.rend(), release);
  else
    std::for_each(table.begin(), table.end(), release);
  table.clear();
}

int64_t BlockManager::acquire_cached_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                                            BlockTable& table, uint64_t root) {
  if (!table.empty())
    throw std::invalid_argument("BlockManager::acquire_cached_prefix: table is not empty");
  if (!caching_) return 0;
  const int64_t bs = block_size_;
  const int64_t full = std::min(max_blocks, static_cast<int64_t>(tokens.size()) / bs);
  uint64_t parent = root;
  for (int64_t k = 0; k < full; ++k) {
    const std::span<const int32_t> blk =
        tokens.subspan(static_cast<size_t>(k * bs), static_cast<size_t>(bs));
    const uint64_t h = chain_hash(parent, blk);
    auto it = map_.find(h);
    if (it == map_.end()) break;
    const int32_t b = it->second;
    const auto i = static_cast<size_t>(b);
    if (parent_[i] != parent || !block_holds(b, blk)) break;  // a hash collision: not this prefix
    if (ref_[i]++ == 0) unlink_free(b);
    table.push_back(b);
    parent = h;
  }
  return static_cast<int64_t>(table.size()) * bs;
}

void BlockManager::forget_record(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (!caching_ || !has_[i]) return;
  auto it = map_.find(hash_[i]);
  if (it != map_.end() && it->second == b) map_.erase(it);
  has_[i] = 0;
}

void BlockManager::cache_full_blocks(const BlockTable& table, std::span<const int32_t> tokens,
                                     int64_t num_computed, int64_t* num_recorded,
                                     std::vector<int32_t>* newly, uint64_t root) {
  if (!caching_) return;
  const int64_t bs = block_size_;
  const int64_t full = std::min({num_computed / bs, static_cast<int64_t>(table.size()),
                                 static_cast<int64_t>(tokens.size()) / bs});
  for (int64_t k = *num_recorded; k < full; ++k) {
    const int32_t b = table[static_cast<size_t>(k)];
    const auto i = static_cast<size_t>(b);
    if (has_[i]) continue;  // shared and recorded by another sequence
    const uint64_t parent =
        k == 0 ? root : hash_[static_cast<size_t>(table[static_cast<size_t>(k - 1)])];
    const std::span<const int32_t> blk =
        tokens.subspan(static_cast<size_t>(k * bs), static_cast<size_t>(bs));
    has_[i] = 1;
    parent_[i] = parent;
    hash_[i] = chain_hash(parent, blk);
    std::copy(blk.begin(), blk.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(i * bs));
    map_.emplace(hash_[i], b);  // keeps an existing block with the same hash
    if (newly) newly->push_back(b);
  }
  *num_recorded = std::max(*num_recorded, full);
}

void BlockManager::drop_partial(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (plen_[i] == 0) return;
  const std::span<const int32_t> toks(tokens_.data() + i * static_cast<size_t>(block_size_),
                                      static_cast<size_t>(plen_[i]));
  for (uint64_t h : prefix_hashes(pparent_[i], toks)) {
    auto it = partial_map_.find(h);
    if (it != partial_map_.end() && it->second == b) partial_map_.erase(it);
  }
  plen_[i] = 0;
}

void BlockManager::cache_partial_block(const BlockTable& table, std::span<const int32_t> tokens,
                                       int64_t num_computed, uint64_t root) {
  if (!caching_) return;
  const int64_t bs = block_size_;
  const int64_t full = num_computed / bs, k = num_computed % bs;
  if (k == 0 || static_cast<int64_t>(table.size()) <= full ||
      static_cast<int64_t>(tokens.size()) < num_computed)
    return;
  const int32_t b = table[static_cast<size_t>(full)];
  const auto i = static_cast<size_t>(b);
  if (ref_[i] != 1 || has_[i]) return;  // shared (a fork's), or somehow a full record
  uint64_t parent = root;
  if (full > 0) {
    if (table[static_cast<size_t>(full - 1)] == kNoBlock) return;  // released: chain unknown
    const auto prev = static_cast<size_t>(table[static_cast<size_t>(full - 1)]);
    if (!has_[prev]) return;  // the chain before it is unknown
    parent = hash_[prev];
  }
  drop_partial(b);
  const std::span<const int32_t> toks =
      tokens.subspan(static_cast<size_t>(full * bs), static_cast<size_t>(k));
  plen_[i] = static_cast<int32_t>(k);
  pparent_[i] = parent;
  std::copy(toks.begin(), toks.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(i * bs));
  for (uint64_t h : prefix_hashes(parent, toks)) partial_map_[h] = b;
}

int64_t BlockManager::acquire_cached_partial(std::span<const int32_t> tokens, int64_t max_tokens,
                                             const BlockTable& table, int32_t* src, uint64_t root) {
  if (!caching_) return 0;
  const int64_t bs = block_size_;
  const int64_t start = static_cast<int64_t>(table.size()) * bs;
  const int64_t m =
      std::min({max_tokens - start, bs - 1, static_cast<int64_t>(tokens.size()) - start});
  if (m <= 0) return 0;
  const uint64_t parent = table.empty() ? root : hash_[static_cast<size_t>(table.back())];
  const std::span<const int32_t> want =
      tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(m));
  const std::vector<uint64_t> hs = prefix_hashes(parent, want);
  for (int64_t j = m; j >= 1; --j) {
    auto it = partial_map_.find(hs[static_cast<size_t>(j - 1)]);
    if (it == partial_map_.end()) continue;
    const int32_t b = it->second;
    const auto i = static_cast<size_t>(b);
    const auto rec = tokens_.begin() + static_cast<std::ptrdiff_t>(i * bs);
    if (plen_[i] < j || pparent_[i] != parent || !std::equal(want.begin(), want.begin() + j, rec))
      continue;  // a hash collision
    if (ref_[i]++ == 0) unlink_free(b);
    *src = b;
    return j;
  }
  return 0;
}

void BlockManager::release_pinned(int32_t b) {
  if (b < 0 || b >= num_blocks_ || ref_[static_cast<size_t>(b)] <= 0)
    throw std::logic_error("BlockManager::release_pinned: block " + std::to_string(b) +
                           " is not pinned");
  if (--ref_[static_cast<size_t>(b)] == 0) push_free(b);
}

int64_t BlockManager::num_partial_blocks() const {
  return caching_ ? std::ranges::count_if(plen_, [](int32_t n) { return n > 0; }) : 0;
}

bool BlockManager::block_holds(int32_t b, std::span<const int32_t> tokens) const {
  if (!caching_ || b < 0 || b >= num_blocks_ || static_cast<int64_t>(tokens.size()) != block_size_)
    return false;
  const auto i = static_cast<size_t>(b);
  return has_[i] && std::ranges::equal(tokens, recorded_tokens(i));
}

void BlockManager::check_invariants() const {
  const auto fail = [](const std::string& what) {
    throw std::logic_error("BlockManager: " + what);
  };
  std::vector<uint8_t> in_list(static_cast<size_t>(num_blocks_), 0);
  int64_t n = 0;
  for (int32_t b = head_, prev = -1; b >= 0; prev = b, b = next_[static_cast<size_t>(b)]) {
    if (prev_[static_cast<size_t>(b)] != prev)
      fail("free list links broken at block " + std::to_string(b));
    if (in_list[static_cast<size_t>(b)]++)
      fail("block " + std::to_string(b) + " twice in the free list");
    if (ref_[static_cast<size_t>(b)] != 0)
      fail("block " + std::to_string(b) + " free with references");
    if (++n > num_blocks_) fail("free list longer than the pool");
  }
  if (n != num_free_)
    fail("free count " + std::to_string(num_free_) + " != free list " + std::to_string(n));
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    if (ref_[i] < 0) fail("negative reference count");
    if (ref_[i] == 0 && !in_list[i])
      fail("block " + std::to_string(b) + " unreferenced but not free");
  }
  if (!caching_) return;
  for (const auto& [h, b] : map_) {
    const auto i = static_cast<size_t>(b);
    if (!has_[i] || hash_[i] != h)
      fail("hash map entry without its record (block " + std::to_string(b) + ")");
  }
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    if (!has_[i]) continue;
    if (chain_hash(parent_[i], recorded_tokens(i)) != hash_[i])
      fail("block " + std::to_string(b) + "'s hash does not match its tokens");
  }
  for (const auto& [h, b] : partial_map_) {
    const auto i = static_cast<size_t>(b);
    if (plen_[i] <= 0)
      fail("partial map entry without its record (block " + std::to_string(b) + ")");
    const std::vector<uint64_t> hs = prefix_hashes(
        pparent_[i],
        {tokens_.data() + i * static_cast<size_t>(block_size_), static_cast<size_t>(plen_[i])});
    if (std::ranges::find(hs, h) == hs.end())
      fail("partial map entry of block " + std::to_string(b) + " is no prefix of its record");
  }
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    if (plen_[i] < 0 || plen_[i] >= block_size_)
      fail("block " + std::to_string(b) + " has a partial record of " + std::to_string(plen_[i]) +
           " tokens");
    if (plen_[i] > 0 && has_[i]) fail("block " + std::to_string(b) + " has both kinds of record");
  }
}

}  // namespace pagoda
