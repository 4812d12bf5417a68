// ModelRunner: turns the scheduler's output into a ForwardBatch (vLLM's
// GPUModelRunner._prepare_inputs / nano-vllm's ModelRunner.prepare_*) and runs
// the ModelExecutor. For each scheduled sequence, its tokens
// [num_computed_tokens, num_computed_tokens + num_new_tokens) are packed with
// their positions and cache slots (block_table[p / block_size] * block_size +
// p % block_size); context_lens = num_computed_tokens + num_new_tokens; a
// logits row is requested only for sequences that sample this step (never
// for a non-final prefill chunk), then the prompt-logprob rows
// (engine/sample/prompt_logprobs.h) after all of those.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/mask_precompute.h"
#include "engine/model/forward_batch.h"
#include "engine/model/model_executor.h"
#include "engine/sample/device_sampling.h"
#include "engine/sched/scheduler.h"

namespace pagoda {

class ModelRunner {
 public:
  explicit ModelRunner(ModelExecutor& executor) : executor_(executor) {}

  // The batch for `out` (blocks must already be allocated by the scheduler).
  // Throws std::logic_error when a block table is too short.
  static ForwardBatch build_batch(const SchedulerOutput& out, int64_t block_size);

  // The step's block swaps (preemption by swap) and copies (partial-block
  // prefix hits): swap_out, block_copies, then swap_in, on
  // the executor: call after Scheduler::schedule() and before execute() or
  // execute_and_sample(), also for a step with no sequences (its swap-outs
  // must land before the blocks they free are written).
  void apply_swaps(const SchedulerOutput& out);

  // Builds the batch and runs the model: logits becomes
  // [out.num_samples() + prompt-logprob rows, vocab_size()] row-major F32,
  // one row per sampling sequence in schedule order, then the prompt rows.
  void execute(const SchedulerOutput& out, std::vector<float>& logits);

  // Device sampling (vLLM samples on the GPU): when the executor can sample
  // on its device, runs the step and samples every sampling sequence there,
  // filling `sampled` with one TokenLogprob per sampled token in schedule
  // order and returning true; otherwise runs nothing and returns false (the
  // caller runs execute() and the host Sampler). Each row carries its
  // sequence's SamplingParams (device_sampling.h): bans from
  // append_sampling_bans, logprobs when Sampler::wants_logprob, a penalty
  // slot when a penalty is set, and a non-greedy row's 64-bit seed drawn
  // from the sequence's own rng, so a seeded request reproduces. A sequence
  // keeps its penalty slot while it samples every step; a sequence that did
  // not sample in a step gives its slot back and has it rebuilt from its
  // ids when it samples again. Prompt-logprob positions of the step are
  // score rows on the device too (prompt_logprobs.h): their results go to
  // the sequences' prompt_logprobs here, and `sampled` holds only the
  // sampled tokens.
  bool execute_and_sample(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids,
                          std::vector<TokenLogprob>& sampled);
  // The sampling rows of `out` as execute_and_sample would pass them
  // (exposed for tests).
  const DeviceSamplingBatch& build_sampling(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids);
  // Penalty slots held now (sequences that sampled with a penalty last step).
  size_t num_penalty_slots_held() const { return slot_of_.size(); }

  ModelExecutor& executor() { return executor_; }

 private:
  // defer_masks: guided rows get their masks in sampling_.prepare() (see
  // execute_and_sample), else now.
  void build_sampling(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids,
                      bool defer_masks);
  ModelExecutor& executor_;
  int32_t acquire_slot(const Sequence& seq, bool& fresh);

  ForwardBatch batch_;  // reused between steps
  DeviceSamplingBatch sampling_;
  std::vector<std::pair<const guided::Guide*, int32_t>> guided_states_;  // build_sampling's scratch
  std::vector<std::pair<size_t, const Sequence*>> guided_rows_;          // (row, sequence) to mask
  std::unique_ptr<guided::MaskFill> mask_fill_;                          // this step's fills
  // Penalty slots: sequence uid -> slot, and the step each was last used.
  std::unordered_map<uint64_t, std::pair<int32_t, uint64_t>> slot_of_;
  std::vector<int32_t> free_slots_;
  int32_t num_slots_ = 0;
  uint64_t step_ = 0;
};

}  // namespace pagoda
