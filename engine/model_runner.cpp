#include "engine/model_runner.h"

#include "engine/sample/prompt_logprobs.h"
#include "engine/sample/sampler.h"

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
  add_prompt_logprob_rows(out, b);  // after the sampling rows
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

bool ModelRunner::device_samplable(const Sequence& seq, const std::vector<int32_t>& eos_token_ids) {
  const SamplingParams& sp = seq.sampling;
  if (sp.presence_penalty != 0.f || sp.frequency_penalty != 0.f || sp.repetition_penalty != 1.f) return false;
  // Logprobs (asked for, or best_of > n ranking by cumulative logprob) and
  // logit_bias need the host Sampler.
  if (!sp.logit_bias.empty() || Sampler::wants_logprob(sp)) return false;
  // Out-of-range values keep the CPU Sampler's handling.
  if (!(sp.temperature >= 0.f) || !(sp.top_p > 0.f && sp.top_p <= 1.f) || !(sp.min_p >= 0.f && sp.min_p <= 1.f))
    return false;
  if (seq.num_output_tokens() < sp.min_tokens &&
      (!sp.stop_token_ids.empty() || (!sp.ignore_eos && !eos_token_ids.empty())))
    return false;
  return true;
}

bool ModelRunner::execute_and_sample(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids,
                                     std::vector<int32_t>& token_ids) {
  if (!executor_.can_sample_on_device()) return false;
  // Prompt-logprob rows are scored on the host (engine/sample/
  // prompt_logprobs.h): a step that has any takes the host path.
  if (wants_prompt_logprob_rows(out)) return false;
  for (const ScheduledSeq& s : out.seqs) {
    // A group parent's prompt row also serves its forks: the host Sampler
    // draws several tokens from one row.
    if (s.samples && (!s.forks.empty() || !device_samplable(*s.seq, eos_token_ids))) return false;
  }
  params_.clear();
  for (const ScheduledSeq& s : out.seqs) {
    if (!s.samples) continue;
    const SamplingParams& sp = s.seq->sampling;
    DeviceSampleParams p;
    p.temperature = sp.greedy() ? 0.f : sp.temperature;
    p.top_k = sp.top_k;
    p.top_p = sp.top_p;
    p.min_p = sp.min_p;
    p.seed = sp.greedy() ? 0 : (*s.seq).rng();
    params_.push_back(p);
  }
  batch_ = build_batch(out, executor_.block_size());
  executor_.execute_and_sample(batch_, params_, token_ids);
  if (token_ids.size() != params_.size())
    throw std::runtime_error("ModelRunner: executor returned " + std::to_string(token_ids.size()) +
                             " ids, expected " + std::to_string(params_.size()));
  return true;
}

}  // namespace pagoda
