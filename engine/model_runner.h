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
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/model/model_executor.h"
#include "engine/sched/scheduler.h"

namespace pagoda {

class ModelRunner {
 public:
  explicit ModelRunner(ModelExecutor& executor) : executor_(executor) {}

  // The batch for `out` (blocks must already be allocated by the scheduler).
  // Throws std::logic_error when a block table is too short.
  static ForwardBatch build_batch(const SchedulerOutput& out, int64_t block_size);

  // Builds the batch and runs the model: logits becomes
  // [out.num_samples() + prompt-logprob rows, vocab_size()] row-major F32,
  // one row per sampling sequence in schedule order, then the prompt rows.
  void execute(const SchedulerOutput& out, std::vector<float>& logits);

  // Device sampling (vLLM samples on the GPU): when the executor can sample
  // on its device and every sampling sequence needs nothing the device
  // sampler lacks (no penalties, logit_bias, logprobs, and no ids to
  // suppress for min_tokens given eos_token_ids), runs the step, fills
  // token_ids with one id per sampling sequence in schedule order and
  // returns true; a non-greedy sequence draws its row's 64-bit seed from its
  // own rng, so a seeded request reproduces. Otherwise runs nothing and
  // returns false (the caller runs execute() and the CPU Sampler).
  bool execute_and_sample(const SchedulerOutput& out, const std::vector<int32_t>& eos_token_ids,
                          std::vector<int32_t>& token_ids);
  // Whether the device sampler can serve this sequence's next token.
  static bool device_samplable(const Sequence& seq, const std::vector<int32_t>& eos_token_ids);

  ModelExecutor& executor() { return executor_; }

 private:
  ModelExecutor& executor_;
  ForwardBatch batch_;  // reused between steps
  std::vector<DeviceSampleParams> params_;
};

}  // namespace pagoda
