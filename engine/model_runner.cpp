#include "engine/model_runner.h"

#include <algorithm>
#include <stdexcept>

#include "engine/guided/guide.h"
#include "engine/guided/mask_precompute.h"
#include "engine/sample/device_rows.h"
#include "engine/sample/prompt_logprobs.h"
#include "engine/sample/sampler.h"

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
  add_prompt_logprob_rows(out, b);  // after the sampling rows
  return b;
}

void ModelRunner::apply_swaps(const SchedulerOutput& out) {
  // swap_out first: a block swapped out may be a copy's (fresh) destination;
  // copies before swap_in, whose blocks are never a copy's pinned source.
  executor_.swap_out(out.swap_out);
  executor_.copy_blocks(out.block_copies);
  executor_.swap_in(out.swap_in);
}

void ModelRunner::execute(const SchedulerOutput& out, std::vector<float>& logits) {
  batch_ = build_batch(out, executor_.block_size());
  executor_.execute(batch_, logits);
  const size_t want = batch_.logits_indices.size() * static_cast<size_t>(executor_.vocab_size());
  if (logits.size() != want)
    throw std::runtime_error("ModelRunner: executor returned " + std::to_string(logits.size()) +
                             " logits, expected " + std::to_string(want));
}

int32_t ModelRunner::acquire_slot(const Sequence& seq, bool& fresh) {
  auto it = slot_of_.find(seq.uid);
  if (it != slot_of_.end()) {
    fresh = false;
    it->second.second = step_;
    return it->second.first;
  }
  fresh = true;
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = num_slots_++;
  }
  slot_of_.emplace(seq.uid, std::make_pair(slot, step_));
  return slot;
}

const DeviceSamplingBatch& ModelRunner::build_sampling(const SchedulerOutput& out,
                                                       const std::vector<int32_t>& eos_token_ids) {
  build_sampling(out, eos_token_ids, /*defer_masks=*/false);
  return sampling_;
}

void ModelRunner::build_sampling(const SchedulerOutput& out,
                                 const std::vector<int32_t>& eos_token_ids, bool defer_masks) {
  ++step_;
  DeviceSamplingBatch& b = sampling_;
  b.clear();
  mask_fill_.reset();  // a step that failed left it: done (or waited for) here
  // The guided rows' masks this step lacks are filled in parallel by the
  // mask workers (a new state of a 150k-token vocabulary costs ~3 ms on
  // one core); deferred, the rows get their masks in b.prepare(), which
  // the executor calls while the forward runs, and this thread helps fill
  // there.
  guided_states_.clear();
  guided_rows_.clear();
  for (const ScheduledSeq& s : out.seqs)
    if (s.samples && s.seq->sampling.guide && s.seq->guide_state >= 0)
      guided_states_.emplace_back(s.seq->sampling.guide.get(), s.seq->guide_state);
  if (!guided_states_.empty()) mask_fill_ = std::make_unique<guided::MaskFill>(guided_states_);
  const int64_t vocab = executor_.vocab_size();
  auto add_mask = [&b, &eos_token_ids, vocab](DeviceSampleRow& r, const Sequence& seq) {
    append_guided_mask(b, r, seq.sampling.guide->mask(seq.guide_state),
                       seq.sampling.guide->accepting(seq.guide_state), eos_token_ids, vocab);
  };
  if (mask_fill_ && !defer_masks) mask_fill_->wait();
  int32_t src = 0;
  auto add = [&](Sequence& seq) {
    const SamplingParams& sp = seq.sampling;
    DeviceSampleRow& r =
        append_sample_row(b, sp, seq.output_ids(), eos_token_ids, src, sp.greedy() ? 0 : seq.rng());
    if (sp.guide && seq.guide_state >= 0) {
      if (defer_masks)
        guided_rows_.emplace_back(b.rows.size() - 1, &seq);
      else
        add_mask(r, seq);
    }
    if (needs_penalty_slot(sp)) {
      bool fresh = false;
      r.slot = acquire_slot(seq, fresh);
      if (fresh) append_slot_init(b, r.slot, seq.prompt_ids(), seq.output_ids());
    }
  };
  for (const ScheduledSeq& s : out.seqs) {
    if (!s.samples) continue;
    add(*s.seq);
    ++src;
  }
  // Slots of sequences that did not sample this step go back (finished,
  // preempted or aborted sequences; rebuilt if they sample again).
  for (auto it = slot_of_.begin(); it != slot_of_.end();) {
    if (it->second.second != step_) {
      free_slots_.push_back(it->second.first);
      it = slot_of_.erase(it);
    } else {
      ++it;
    }
  }
  b.num_slots = num_slots_;
  if (defer_masks && !guided_rows_.empty())
    b.deferred = [this, &b, add_mask] {
      mask_fill_->wait();
      for (const auto& [row, seq] : guided_rows_) add_mask(b.rows[row], *seq);
    };
}

bool ModelRunner::execute_and_sample(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids,
                                     std::vector<TokenLogprob>& sampled) {
  if (!executor_.can_sample_on_device()) return false;
  build_sampling(out, eos_token_ids, /*defer_masks=*/true);
  // Prompt-logprob positions are score rows after the sampling rows
  // (engine/sample/prompt_logprobs.h), their logits rows after the sampling
  // logits rows (build_batch).
  const size_t num_sampled = sampling_.rows.size();
  append_prompt_score_rows(out, static_cast<int32_t>(out.num_samples()), sampling_);
  batch_ = build_batch(out, executor_.block_size());
  try {
    executor_.execute_and_sample(batch_, sampling_, sampled);
  } catch (...) {
    // The fills must end before their guides may go (an aborted request).
    sampling_.deferred = nullptr;
    mask_fill_.reset();  // waits for the workers
    throw;
  }
  mask_fill_.reset();
  if (sampling_.deferred)
    throw std::logic_error(
        "ModelRunner: the executor sampled without DeviceSamplingBatch::prepare()");
  if (sampled.size() != sampling_.rows.size())
    throw std::runtime_error("ModelRunner: executor returned " + std::to_string(sampled.size()) +
                             " samples, expected " + std::to_string(sampling_.rows.size()));
  record_prompt_scores(out, std::span<const TokenLogprob>(sampled).subspan(num_sampled));
  sampled.resize(num_sampled);
  return true;
}

}  // namespace pagoda
