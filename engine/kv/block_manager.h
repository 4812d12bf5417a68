// BlockManager: owns the paged KV cache's blocks (vLLM's BlockSpaceManager /
// nano-vllm's BlockManager; PagedAttention, Kwon et al. 2023). The cache is
// num_blocks fixed-size blocks of block_size token slots each; a sequence's
// block table lists the block ids holding its tokens in order, so the token at
// position p sits in table[p / block_size] at offset p % block_size.
//
// Blocks are reference counted so that sequences can share blocks (parallel
// samples / beams forking off one prompt): fork() shares a table, and
// append_slot() copies on write when the last block is shared. Nothing else
// allocates blocks. Not thread-safe: the engine thread owns it.
// The Scheduler forks only full prompt blocks (n > 1 / best_of, scheduler.h)
// and so never needs append_slot's copy: no ModelExecutor op performs a
// BlockCopy yet (SchedulerOutput::block_copies stays empty).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace pagoda {

using BlockTable = std::vector<int32_t>;

// A block to copy before the step runs (copy-on-write): KV of block `src`
// into block `dst`, all layers.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

class BlockManager {
 public:
  // num_blocks > 0, block_size > 0; throws std::invalid_argument otherwise.
  BlockManager(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
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

  // Drops the table's references; blocks whose count reaches 0 return to the
  // free list. Clears the table.
  void free(BlockTable& table);

  int32_t ref_count(int32_t block_id) const { return ref_[static_cast<size_t>(block_id)]; }

 private:
  int32_t take_block();

  int64_t num_blocks_;
  int64_t block_size_;
  std::deque<int32_t> free_;  // FIFO: least recently freed blocks first
  std::vector<int32_t> ref_;  // [num_blocks] reference counts
};

}  // namespace pagoda
