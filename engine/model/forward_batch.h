// ForwardBatch: the host-side description of one model step, built by the
// ModelRunner from the scheduler's output (vLLM's "attention metadata").
//
// Tokens of all scheduled sequences are packed along one axis of T tokens:
// sequence i owns tokens [query_start_loc[i], query_start_loc[i+1]). A
// prefill (or prefill chunk) contributes several tokens, a decode one.
//
// KV-cache layout (per layer, per K and V): [num_blocks, block_size,
// num_kv_heads, head_dim]. The token at absolute position p of a sequence
// lives in block block_tables[i][p / block_size], at offset p % block_size;
// its slot is block_id * block_size + offset (vLLM's slot mapping).
//
// Attention is causal over each sequence's positions: the query token at
// position p attends to cache positions 0..p of its own sequence. The new
// tokens' K/V are written to the cache (slot_mapping) before attention reads
// it, so one paged-attention op serves prefill, chunked prefill and decode.
#pragma once
#include <cstdint>
#include <algorithm>
#include <vector>

namespace pagoda {

struct ForwardBatch {
  // [T] token ids and their absolute positions in their sequence.
  std::vector<int32_t> input_ids;
  std::vector<int32_t> positions;
  // [T] cache slot for each token (block_id * block_size + offset).
  std::vector<int32_t> slot_mapping;
  // [B + 1] prefix sums of query lengths; query_start_loc[0] == 0,
  // query_start_loc[B] == T.
  std::vector<int32_t> query_start_loc;
  // [B] number of tokens in the KV cache for each sequence once this step's
  // tokens are written (= position of its last new token + 1).
  std::vector<int32_t> context_lens;
  // [B, max_blocks_per_seq] row-major block ids; unused entries are 0.
  std::vector<int32_t> block_tables;
  int32_t max_blocks_per_seq = 0;
  // [L] token rows (indices into T) whose logits are wanted, in order; one per
  // sequence that samples this step (the last token of a finished prefill or
  // a decode). The logits come back as [L, vocab_size].
  std::vector<int32_t> logits_indices;

  int32_t num_tokens() const { return static_cast<int32_t>(input_ids.size()); }
  int32_t num_seqs() const {
    return query_start_loc.empty() ? 0 : static_cast<int32_t>(query_start_loc.size()) - 1;
  }
  int32_t max_query_len() const {
    int32_t m = 0;
    for (size_t i = 0; i + 1 < query_start_loc.size(); ++i)
      m = std::max(m, query_start_loc[i + 1] - query_start_loc[i]);
    return m;
  }
  int32_t max_context_len() const {
    int32_t m = 0;
    for (int32_t c : context_lens) m = std::max(m, c);
    return m;
  }
  // True when every sequence contributes exactly one token (pure decode).
  bool is_decode_only() const { return num_tokens() == num_seqs(); }
};

}  // namespace pagoda
