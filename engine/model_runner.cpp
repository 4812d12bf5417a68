#include "engine/model_runner.h"

#include <algorithm>
#include <stdexcept>

namespace pagoda {

ForwardBatch ModelRunner::build_batch(const SchedulerOutput& out, int64_t block_size) {
  ForwardBatch b;
  size_t max_blocks = 0;
  for (const ScheduledSeq& s : out.seqs) max_blocks = std::max(max_blocks, s.seq->block_table.size());
  b.max_blocks_per_seq = static_cast<int32_t>(max_blocks);
  b.query_start_loc.push_back(0);
  b.block_tables.assign(out.seqs.size() * max_blocks, 0);
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const Sequence& seq = *out.seqs[i].seq;
    const int64_t begin = seq.num_computed_tokens;
    const int64_t end = begin + out.seqs[i].num_new_tokens;
    if (static_cast<int64_t>(seq.block_table.size()) * block_size < end)
      throw std::logic_error("ModelRunner: block table of '" + seq.request_id + "' too short");
    for (int64_t p = begin; p < end; ++p) {
      b.input_ids.push_back(seq.token_ids[static_cast<size_t>(p)]);
      b.positions.push_back(static_cast<int32_t>(p));
      int64_t block = seq.block_table[static_cast<size_t>(p / block_size)];
      b.slot_mapping.push_back(static_cast<int32_t>(block * block_size + p % block_size));
    }
    b.query_start_loc.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.context_lens.push_back(static_cast<int32_t>(end));
    std::copy(seq.block_table.begin(), seq.block_table.end(),
              b.block_tables.begin() + static_cast<std::ptrdiff_t>(i * max_blocks));
    if (out.seqs[i].samples) b.logits_indices.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
  }
  return b;
}

void ModelRunner::execute(const SchedulerOutput& out, std::vector<float>& logits) {
  batch_ = build_batch(out, executor_.block_size());
  executor_.execute(batch_, logits);
  const size_t want = batch_.logits_indices.size() * static_cast<size_t>(executor_.vocab_size());
  if (logits.size() != want)
    throw std::runtime_error("ModelRunner: executor returned " + std::to_string(logits.size()) +
                             " logits, expected " + std::to_string(want));
}

}  // namespace pagoda
