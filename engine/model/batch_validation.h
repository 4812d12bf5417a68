// validate_batch: the executor's check of a step's metadata against the
// model and the KV cache, so that a bad ForwardBatch is an exception, never
// an out-of-bounds access on any backend (or on any tensor-parallel rank:
// it runs once, before the batch is handed to the ranks).
#pragma once
#include <cstdint>

#include "engine/kv/block_manager.h"
#include "engine/model/forward_batch.h"

namespace pagoda {

// Throws std::invalid_argument ("ModelExecutor::execute: ...") naming the
// first problem: token count outside 1..max_tokens, more than max_logits
// logits rows, per-token arrays of the wrong length, query_start_loc not
// running from 0 to T or decreasing, context_lens/block_tables not matching
// the sequences, a token id outside [0, vocab), a slot outside the cache
// (num_blocks * block_size), a logits index outside the batch, a position
// outside [0, max_model_len), or a block table too short or naming a block
// outside [0, num_blocks). With sliding_window > 0 (every layer windowed:
// ModelExecutor::uniform_sliding_window) a block wholly before the window of
// the sequence's first query in the batch may be kNoBlock (released by the
// Scheduler; no kernel reads it).
void validate_batch(const ForwardBatch& b, int64_t vocab, int64_t num_blocks, int64_t block_size,
                    int64_t max_tokens, int64_t max_logits, int64_t max_model_len,
                    int64_t sliding_window = 0);

}  // namespace pagoda
