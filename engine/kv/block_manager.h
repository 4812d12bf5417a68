// BlockManager: owns the paged KV cache's blocks (vLLM's BlockSpaceManager /
// nano-vllm's BlockManager; PagedAttention, Kwon et al. 2023). The cache is
// num_blocks fixed-size blocks of block_size token slots each; a sequence's
// block table lists the block ids holding its tokens in order, so the token at
// position p sits in table[p / block_size] at offset p % block_size.
//
// Blocks are reference counted so that sequences can share blocks (prefix
// cache hits, parallel samples): fork() shares a table, and append_slot()
// copies on write when the last block is shared. Nothing else allocates
// blocks. Not thread-safe: the engine thread owns it. The Scheduler shares
// only full blocks, through the prefix cache (n > 1 / best_of included,
// scheduler.h), and so never needs append_slot's copy; its BlockCopy list
// carries the partial-block hits below (ModelExecutor::copy_blocks).
//
// Automatic prefix caching (enable_caching; vLLM v1's KVCacheManager over a
// BlockPool, nano-vllm's hash table): a full block whose K/V are computed is
// recorded (cache_full_blocks) under a hash chained over its tokens and
// every token before it, h_i = H(h_{i-1}, tokens of block i), with its
// tokens kept beside it. Freed blocks keep their record and wait in the
// free list in least-recently-freed order (a table is freed last block
// first, so a prefix outlives its tail); taking a block for new tokens
// evicts the record of the block at the head. acquire_cached_prefix() walks
// a new sequence's full blocks through the hash map and takes the longest
// run of hits (a free cached block leaves the free list), comparing each
// hit's tokens and parent hash, so a hash collision can only share blocks
// whose own tokens are equal and whose prefixes hash alike (64-bit chain).
//
// Cache salts (vLLM's cache_salt request field): a request's chain starts
// from root_for_salt(salt) instead of kUnsaltedRoot (vLLM mixes the salt
// into its first block's hash), so the hash and the parent of every block
// it records differ from those of another salt's blocks with the same
// tokens: only requests with the same salt (or none) share cached blocks,
// full and partial. Each call below that hashes a chain takes the root of
// the sequence it is for.
//
// Partially filled blocks (beyond vLLM, whose cache holds full blocks only;
// SGLang's radix cache reuses any token prefix): when a sequence's table is
// released, its last block, if partly filled with computed tokens and owned
// by it alone, is recorded (cache_partial_block) with those k < block_size
// tokens and the chain hash of the full blocks before it, under the hash of
// each of its token prefixes 1..k. A new sequence whose full-block hits end
// where such a record starts takes the longest prefix of the record that
// its own next tokens match (acquire_cached_partial): the record's block is
// pinned (a reference) and copied into the sequence's fresh block before
// the step (BlockCopy; slots past the match are overwritten as usual), so
// e.g. a beam search step, a resent prompt or a chat turn that continues
// the previous one computes only the tokens after the match. A record
// lives until its block is taken for new tokens, like a full one.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/kv/block_swap.h"

namespace pagoda {

using BlockTable = std::vector<int32_t>;

// A block-table entry whose block was released because no query can read
// it any more (the Scheduler's sliding-window release, SchedulerConfig::
// sliding_window): its positions are before every future query's window,
// so no kernel reads it. free() and fork() skip it.
constexpr int32_t kNoBlock = -1;

// The first block a query at position query_pos reads when every layer sees
// only the last `window` positions (keys from query_pos - window + 1 on):
// blocks before it may be kNoBlock. 0 without a window (window <= 0).
inline int64_t first_block_in_window(int64_t query_pos, int64_t window, int64_t block_size) {
  return window > 0 ? std::max<int64_t>(0, query_pos - window + 1) / block_size : 0;
}

class BlockManager {
 public:
  // num_blocks > 0, block_size > 0; throws std::invalid_argument otherwise.
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_caching = false);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  // Free blocks, cached ones (kept for reuse, evictable) included.
  int64_t num_free() const { return num_free_; }
  int64_t num_used() const { return num_blocks_ - num_free(); }
  // Blocks needed to hold num_tokens tokens: ceil(num_tokens / block_size).
  int64_t blocks_for(int64_t num_tokens) const;

  // True when `table` can be grown to hold num_tokens tokens in total
  // (prefill or a prefill chunk: enough free blocks for the missing ones).
  bool can_allocate(const BlockTable& table, int64_t num_tokens) const;
  // Grows `table` with fresh blocks (ref count 1) until it holds num_tokens
  // tokens. Throws std::runtime_error when can_allocate() is false.
  void allocate(BlockTable& table, int64_t num_tokens);

  // Decode: true when the slot for the token at position num_tokens - 1 of a
  // sequence now num_tokens long can be provided (a new block if that position
  // starts one, or a copy if the last block is shared).
  bool can_append(const BlockTable& table, int64_t num_tokens) const;
  // Provides that slot. Returns the copy to perform when the last block was
  // shared (copy-on-write; the table now points at the private copy).
  // Throws std::runtime_error when can_append() is false.
  std::optional<BlockCopy> append_slot(BlockTable& table, int64_t num_tokens);

  // Returns a table sharing every block of `parent` (ref counts + 1): the
  // start of a parallel sample or beam.
  BlockTable fork(const BlockTable& parent);

  // Drops the table's references (kNoBlock entries skipped); blocks whose
  // count reaches 0 return to the free list. Clears the table.
  void free(BlockTable& table);

  int32_t ref_count(int32_t block_id) const { return ref_[static_cast<size_t>(block_id)]; }

  // ---- prefix caching (no-ops returning 0 when !caching()) ---------------
  bool caching() const { return caching_; }
  // The chain root of requests without a cache salt.
  static constexpr uint64_t kUnsaltedRoot = 0x6a09e667f3bcc908ull;
  // The chain root of requests salted with `salt` (kUnsaltedRoot for "").
  static uint64_t root_for_salt(std::string_view salt);
  // Puts into `table` (empty; std::invalid_argument otherwise) the longest
  // run of cached blocks holding tokens[0, k * block_size) for k <=
  // max_blocks after the chain root `root`, one reference each. Returns the
  // tokens they hold.
  int64_t acquire_cached_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                                BlockTable& table, uint64_t root = kUnsaltedRoot);
  // Records table's full blocks [*num_recorded, num_computed / block_size)
  // as holding `tokens` (a sequence's tokens, whose first num_computed have
  // their K/V in the cache, or will have once the step being scheduled
  // ran) and advances *num_recorded. A block whose hash is already cached in
  // another block is recorded but not mapped (the other one serves hits).
  // The blocks recorded by this call (not those recorded before) are
  // appended to *newly when given.
  // The first block's parent is `root` (the sequence's chain root).
  void cache_full_blocks(const BlockTable& table, std::span<const int32_t> tokens,
                         int64_t num_computed, int64_t* num_recorded,
                         std::vector<int32_t>* newly = nullptr, uint64_t root = kUnsaltedRoot);
  // Forgets block b's full-block record (a step that recorded it failed
  // before computing it); a no-op when it has none.
  void forget_record(int32_t b);
  // True when block b is recorded as holding exactly `tokens` (block_size
  // of them); false when it is not recorded (or !caching()).
  bool block_holds(int32_t b, std::span<const int32_t> tokens) const;
  // Blocks that serve prefix hits (in use or free).
  int64_t num_cached_blocks() const { return static_cast<int64_t>(map_.size()); }

  // Records the last block of `table` as a partial block, before the table
  // is freed: when num_computed (the computed tokens of `tokens`, a
  // sequence's tokens held by `table`) ends inside table[num_computed /
  // block_size], that block is owned by this table alone and the full
  // blocks before it are recorded (cache_full_blocks). Otherwise a no-op.
  void cache_partial_block(const BlockTable& table, std::span<const int32_t> tokens,
                           int64_t num_computed, uint64_t root = kUnsaltedRoot);
  // For a sequence whose `table` holds its cached full blocks (the
  // acquire_cached_prefix hits: tokens[0, table.size() * block_size)): the
  // longest j in [1, min(max_tokens - that, block_size - 1)] for which a
  // partial record holds tokens[that, that + j) after the same full-block
  // chain. On a hit the record's block is pinned (one reference; released
  // by release_pinned after the copy ran) and stored in *src; returns j
  // (0: no hit, *src untouched).
  int64_t acquire_cached_partial(std::span<const int32_t> tokens, int64_t max_tokens,
                                 const BlockTable& table, int32_t* src,
                                 uint64_t root = kUnsaltedRoot);
  // Drops the reference acquire_cached_partial took; the block keeps its
  // record.
  void release_pinned(int32_t b);
  // Blocks holding a partial record (free or pinned).
  int64_t num_partial_blocks() const;
  // Checks the invariants (tests, the simulation): the free list holds
  // exactly the blocks of reference count 0; every mapped hash is its
  // block's record; every record's hash is H(parent hash, its tokens);
  // every partial-map entry is the hash of a prefix of its block's partial
  // record, and no block holds both kinds of record.
  // Throws std::logic_error naming the first violation.
  void check_invariants() const;

 private:
  int32_t take_block();
  void push_free(int32_t b);  // to the tail (most recently freed)
  void unlink_free(int32_t b);
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // chain_hash(parent, tokens[0, j)) for j = 1..tokens.size(), in order.
  static std::vector<uint64_t> prefix_hashes(uint64_t parent, std::span<const int32_t> tokens);
  void drop_partial(int32_t b);  // forgets b's partial record and its map entries
  std::span<const int32_t> recorded_tokens(size_t i) const;  // block i's record (caching)

  int64_t num_blocks_;
  int64_t block_size_;
  bool caching_ = false;
  // Free list: doubly linked over block ids, least recently freed first.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;
  int64_t num_free_ = 0;
  std::vector<int32_t> ref_;  // [num_blocks] reference counts
  // Records (caching): has_[b], hash_[b], parent_[b] (the chain hash before
  // it), tokens_[b * block_size ...].
  std::vector<uint8_t> has_;
  std::vector<uint64_t> hash_, parent_;
  std::vector<int32_t> tokens_;
  std::unordered_map<uint64_t, int32_t> map_;  // hash -> block serving hits
  // Partial records (caching): plen_[b] tokens (0: none) in tokens_[b *
  // block_size ...] after the chain hash pparent_[b]; partial_map_ maps the
  // hash of each prefix of a record to its block (the latest record wins).
  std::vector<int32_t> plen_;
  std::vector<uint64_t> pparent_;
  std::unordered_map<uint64_t, int32_t> partial_map_;
};

}  // namespace pagoda
