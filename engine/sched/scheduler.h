// Scheduler: continuous batching with chunked prefill, as vLLM v1's
// scheduler (vllm/v1/core/sched/scheduler.py) and nano-vllm's.
//
// schedule(), each step, within max_num_batched_tokens tokens, max_num_seqs
// sequences and the free KV blocks:
//  1. running sequences first, in admission order: a decoding one gets one
//     token, one still prefilling gets its next chunk (as much as the token
//     budget allows). If the block manager cannot give a sequence its blocks,
//     the most recently admitted running sequence is preempted by recompute
//     (blocks freed, num_computed_tokens = 0, back to the front of the waiting
//     queue with its generated tokens kept, to be re-prefilled with the
//     prompt) until it can, or until it was itself preempted;
//  2. then, if nothing was preempted this step, waiting sequences in FIFO
//     order are admitted (prefill, chunked when the budget runs out). One
//     that does not find free blocks waits (requests never fail for lack of
//     blocks).
// postprocess() advances num_computed_tokens, appends the sampled tokens,
// checks stops (stop_checker.h), frees finished sequences' blocks at once and
// pushes every delta to the sequences' OutputChannels.
// Engine thread only.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/sched/sequence.h"
#include "engine/sched/stop_checker.h"

namespace pagoda {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_model_len = 2048;
  std::vector<int32_t> eos_token_ids;
};

// One sequence's share of a step: tokens [num_computed_tokens,
// num_computed_tokens + num_new_tokens) are fed to the model.
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t num_new_tokens = 0;
  // True when this step completes the sequence's known tokens, so its last
  // row's logits are sampled (a decode or a final prefill chunk).
  bool samples = false;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;   // running order
  std::vector<BlockCopy> block_copies;  // copy-on-write, before the step
  int64_t num_prefill_tokens = 0;   // tokens of sequences not yet decoding
  int64_t num_decode_tokens = 0;
  int64_t num_preempted = 0;
  // Sequences finished while scheduling (alone and still out of KV blocks:
  // "length"); their final deltas are already pushed.
  int64_t num_finished_by_capacity = 0;
  bool empty() const { return seqs.empty(); }
  int64_t num_samples() const;
};

struct PostprocessResult {
  int64_t num_generated = 0;  // tokens appended
  std::vector<FinishReason> finished;  // one per sequence that finished
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, BlockManager& blocks);
  ~Scheduler();

  // Queues a new sequence (waiting). Its request id must not be in use
  // (contains() first); throws std::invalid_argument otherwise.
  void add(std::unique_ptr<Sequence> seq);
  bool contains(const std::string& request_id) const { return seqs_.count(request_id) != 0; }
  // Aborts a waiting or running sequence: frees its blocks, pushes a final
  // delta with finish_reason "abort". False when the id is unknown.
  bool abort(const std::string& request_id);
  // Aborts everything (engine shutdown). Returns how many were aborted.
  int64_t abort_all();

  SchedulerOutput schedule();
  // sampled[k]: the token for the k-th sequence of `out` with samples == true.
  PostprocessResult postprocess(const SchedulerOutput& out, std::span<const int32_t> sampled);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  int64_t num_preemptions_total() const { return num_preemptions_total_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  void preempt(Sequence* seq);
  // Frees the sequence's blocks, pushes its final delta and forgets it.
  void retire(Sequence* seq);

  SchedulerConfig config_;
  StopConfig stop_config_;
  BlockManager& blocks_;
  std::map<std::string, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  int64_t num_preemptions_total_ = 0;
};

}  // namespace pagoda
