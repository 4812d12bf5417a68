// validate_batch (engine/model/batch_validation.h).
#include "engine/model/batch_validation.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace pagoda {

// Checks a step's metadata against the model and the cache so a bad batch
// is an exception, never an out-of-bounds access on any backend.
void validate_batch(const ForwardBatch& b, int64_t vocab, int64_t num_blocks, int64_t block_size,
                    int64_t max_tokens, int64_t max_logits, int64_t max_model_len,
                    int64_t sliding_window) {
  auto fail = [](const std::string& w) { throw std::invalid_argument("ModelExecutor::execute: " + w); };
  const int64_t T = b.num_tokens(), B = b.num_seqs();
  if (T <= 0 || T > max_tokens)
    fail(std::to_string(T) + " tokens (1.." + std::to_string(max_tokens) + " allowed)");
  if (static_cast<int64_t>(b.logits_indices.size()) > max_logits)
    fail(std::to_string(b.logits_indices.size()) + " logits rows (max " + std::to_string(max_logits) + ")");
  if (b.positions.size() != static_cast<size_t>(T) || b.slot_mapping.size() != static_cast<size_t>(T))
    fail("positions/slot_mapping must have one entry per token");
  if (B < 1 || b.query_start_loc.front() != 0 || b.query_start_loc.back() != T)
    fail("query_start_loc must run from 0 to num_tokens");
  if (b.context_lens.size() != static_cast<size_t>(B) || b.max_blocks_per_seq < 1 ||
      b.block_tables.size() != static_cast<size_t>(B * b.max_blocks_per_seq))
    fail("context_lens/block_tables do not match num_seqs");
  for (int32_t id : b.input_ids)
    if (id < 0 || id >= vocab) fail("token id " + std::to_string(id) + " outside the vocabulary");
  for (int32_t s : b.slot_mapping)
    if (s >= num_blocks * block_size) fail("slot " + std::to_string(s) + " outside the KV cache");
  for (int32_t l : b.logits_indices)
    if (l < 0 || l >= T) fail("logits index " + std::to_string(l) + " out of range");
  for (int64_t i = 0; i < B; ++i) {
    const int32_t q0 = b.query_start_loc[static_cast<size_t>(i)], q1 = b.query_start_loc[static_cast<size_t>(i + 1)];
    if (q1 < q0) fail("query_start_loc must be non-decreasing");
    int32_t last = -1, first = std::numeric_limits<int32_t>::max();
    for (int32_t t = q0; t < q1; ++t) {
      const int32_t p = b.positions[static_cast<size_t>(t)];
      if (p < 0 || p >= max_model_len) fail("position " + std::to_string(p) + " outside max_model_len");
      last = std::max(last, p);
      first = std::min(first, p);
    }
    // Blocks [0, released) end before the first query's window.
    const int64_t released =
        last >= 0 ? first_block_in_window(first, sliding_window, block_size) : 0;
    const int64_t nblk = (static_cast<int64_t>(last) + block_size) / block_size;
    if (nblk > b.max_blocks_per_seq) fail("block table too short for position " + std::to_string(last));
    for (int64_t k = 0; k < nblk && last >= 0; ++k) {
      const int32_t blk = b.block_tables[static_cast<size_t>(i * b.max_blocks_per_seq + k)];
      if (blk == kNoBlock && k < released) continue;
      if (blk < 0 || blk >= num_blocks) fail("block id " + std::to_string(blk) + " outside the KV cache");
    }
  }
}

}  // namespace pagoda
