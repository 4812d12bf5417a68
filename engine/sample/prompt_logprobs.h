// Prompt logprobs (vLLM's SamplingParams.prompt_logprobs; vLLM v1's
// GPUModelRunner._get_prompt_logprobs_dict): for a request asking for k,
// every prompt position p >= 1 gets the raw log-softmax logprob of prompt
// token p given tokens [0, p), its rank and the k most likely tokens
// (PromptLogprob, engine/request.h). The logits row of position q scores
// token q + 1, so a prompt of P tokens needs the rows of positions
// 0..P-2; the row of P-1 is the one that samples.
//
// Per step: a scheduled sequence that is its group's first (index 0; the
// other samples never compute them) and whose request asks for
// prompt logprobs needs the rows of its chunk's positions q in
// [max(begin, done), min(end, P - 1)), where [begin, end) are the tokens fed
// this step and done = Sequence::prompt_logprobs.size() (positions already
// scored: chunked prefill scores each chunk once, and a recompute after
// preemption scores nothing again). Those rows follow the sampling rows in
// ForwardBatch::logits_indices (the sampler reads only its own rows, which
// come first), in schedule order.
//
// Cost: the scheduler scores at most max_prompt_logprob_tokens positions a
// step. On the device path (CUDA) each position is a score row of the
// step's DeviceSamplingBatch (append_prompt_score_rows): the device reduces
// its logits row to the token's logprob, rank and top k, and only those come
// back; the other rows of the step are sampled on the device as usual. On
// the host path (CPU) the rows come back as [rows, vocab] F32 logits and are
// scored by record_prompt_logprobs. vLLM likewise materialises each chunk's
// prompt logits. Steps without such rows pay one scan over the scheduled
// sequences.
#pragma once
#include <cstdint>
#include <span>

#include "engine/model/forward_batch.h"
#include "engine/request.h"
#include "engine/sample/device_sampling.h"
#include "engine/sched/scheduler.h"

namespace pagoda {

// The positions [first, first + count) of `s` whose rows are scored this
// step (count 0: none).
struct PromptLogprobRows {
  int64_t first = 0;
  int64_t count = 0;
};
PromptLogprobRows prompt_logprob_rows(const ScheduledSeq& s);

// Appends the prompt-logprob rows of `out` (schedule order) to
// b.logits_indices; b must be `out`'s batch with its sampling rows already
// in (query_start_loc filled).
void add_prompt_logprob_rows(const SchedulerOutput& out, ForwardBatch& b);

// Scores the rows add_prompt_logprob_rows asked for: logits is the step's
// [num_samples + rows, vocab] F32 (sampling rows first), read only. Appends
// one PromptLogprob per row to its sequence's prompt_logprobs. Call after
// execute and before Scheduler::postprocess (the rows depend on
// num_computed_tokens). Throws std::logic_error when logits is too short.
void record_prompt_logprobs(const SchedulerOutput& out, std::span<const float> logits,
                            int64_t vocab);

// Device path: appends one score row (DeviceSampleRow::score_token) per
// prompt-logprob row of `out`, in add_prompt_logprob_rows' order, reading
// logits rows first_row, first_row + 1, ... (first_row: the step's sampling
// rows, out.num_samples()). Returns the number appended.
size_t append_prompt_score_rows(const SchedulerOutput& out, int32_t first_row,
                                DeviceSamplingBatch& b);

// Device path: appends the results of those score rows (`scores`, one per
// row in that order) to their sequences' prompt_logprobs. Call before
// Scheduler::postprocess. Throws std::logic_error when the count differs.
void record_prompt_scores(const SchedulerOutput& out, std::span<const TokenLogprob> scores);

// One position's entry from its logits row: token's raw logprob (log-softmax
// in double precision), its rank (the number of tokens whose logprob is >=
// its own, itself included: vLLM's batched_count_greater_than)
// and the k most likely (k capped at the vocabulary), ties to the lower id.
PromptLogprob score_prompt_token(std::span<const float> row, int32_t token, int k);

}  // namespace pagoda
