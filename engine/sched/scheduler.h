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
//     prompt) or by swap (below) until it can, or until it was itself
//     preempted;
//  2. then, if nothing was preempted this step, swapped sequences in the
//     order they were swapped out are swapped back in and scheduled (vLLM
//     v0's _schedule_swapped), while their blocks, seats and tokens fit;
//  3. then, if nothing was preempted this step and no sequence is still
//     swapped out, waiting sequences in FIFO order are admitted (prefill,
//     chunked when the budget runs out). One that does not find free blocks
//     waits (requests never fail for lack of blocks).
//
// Preemption by swap (SchedulerConfig::preemption_mode, preemption_mode.h;
// vLLM v0's _preempt_by_swap / _swap_in and BlockSpaceManager.swap_out /
// swap_in): the victim's blocks holding its computed tokens are paired with
// fresh host blocks (HostBlockPool) in SchedulerOutput::swap_out, its device
// blocks are released as on retirement (release_blocks: cached blocks keep
// their records in the LRU free list) and it joins the swapped queue with
// num_computed_tokens kept. Swapping in, it first takes the longest run of
// its computed full blocks still cached on the device (prefix caching), gets
// fresh blocks for the rest, whose host copies are listed in
// SchedulerOutput::swap_in, and its host blocks are freed; the swapped-in
// full blocks are recorded in the prefix cache at once. The executor must
// perform swap_out then swap_in before the step's forward (ModelRunner::
// apply_swaps): a block freed by a swap-out may be written by that forward.
// No step both swaps out and swaps in. When the host pool cannot hold a
// victim's blocks it is preempted by recompute instead (logged once). The
// 1st, 51st, 101st, ... preemption is logged as a warning (vLLM v0).
// postprocess() advances num_computed_tokens, appends the sampled tokens,
// checks the token-level stops (stop_checker.h), frees finished sequences'
// blocks at once and returns one SequenceUpdate per appended token or
// finish (sequence_update.h): text, stop strings and deltas are the
// OutputProcessor's (output_processor.h), which names the sequences a stop
// string ended; stop() then ends them here (vLLM v1's split of the engine
// core and the output processor).
//
// n > 1 / best_of (SequenceGroup, sequence.h): as vLLM v1's child
// requests, every sequence of the group is queued (in index order) and then
// scheduled, preempted (the group's rule for the unset mode: swap while it
// has more than one unfinished sequence) and finished on its own; each
// takes one of max_num_seqs. They share the prompt through the prefix cache
// (below): the others admitted in seqs[0]'s step take its full prompt
// blocks and each computes the prompt's last partial block and samples its
// first token from its own row. Only seqs[0] scores prompt logprobs.
//
// Automatic prefix caching (when the BlockManager caches, as vLLM v1): a
// waiting sequence with no blocks first takes the longest run of cached
// full blocks holding its leading tokens (prompt, and output when it was
// preempted), leaving at least its last token to compute so that the step
// yields its logits, and starts from there; then, when a released
// sequence's partially filled block continues those blocks with its next
// tokens, from a copy of it (BlockManager::acquire_cached_partial;
// SchedulerOutput::block_copies). As vLLM v1's allocate_slots, a block is
// recorded when the step that fills it is scheduled: a sequence admitted
// later in the same step can take it, and reads it after the forward wrote
// it (every layer writes the step's K/V before its attention reads the
// cache; the taker comes later in the batch). Nothing scheduled in a step
// is preempted in that step (victims are taken from the back of the
// running queue, past the sequence being scheduled), so such a block is
// always computed by its step; if the step never reaches postprocess (its
// forward threw), the next schedule() forgets the records of that step's
// blocks. A released sequence's partial last block is recorded too.
// A sequence that scores prompt logprobs (seqs[0] of a request asking for
// them) skips the lookup (every prompt position must be computed). The
// tokens looked up and hit are counted (prefix_cache_queries /
// prefix_cache_hits).
// Engine thread only.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/kv/block_swap.h"
#include "engine/kv/host_block_pool.h"
#include "engine/sched/preemption_mode.h"
#include "engine/sched/sequence.h"
#include "engine/sched/sequence_update.h"
#include "engine/sched/stop_checker.h"

namespace pagoda {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_model_len = 2048;
  // Prompt tokens of prompt_logprobs sequences prefilled per step, in all
  // (EngineConfig::max_prompt_logprob_tokens).
  int64_t max_prompt_logprob_tokens = 256;
  // vLLM's long_prefill_token_threshold (v1 scheduler): > 0 caps the tokens
  // one sequence prefills in a step (a longer prompt goes in chunks of this
  // many), bounding how long a step that carries a prefill chunk stalls the
  // decodes batched with it; 0: only max_num_batched_tokens caps it.
  int64_t long_prefill_token_threshold = 0;
  // > 0: a step that may carry decodes (a running or swapped sequence with
  // one token left to compute, its prompt done) schedules at most this many prompt
  // tokens in all — prefill chunks of running, swapped-in and waiting
  // sequences — so no prefill stretches a decode step by more than that
  // much work; steps without decodes keep the whole budget. 0: off. Not a
  // vLLM flag (vLLM v1 bounds one request's chunk with
  // long_prefill_token_threshold, which also splits prompts on an idle
  // server).
  int64_t max_prefill_tokens_with_decodes = 0;
  std::vector<int32_t> eos_token_ids;
  // > 0 when every attention layer sees only the last sliding_window
  // positions (ModelExecutor::uniform_sliding_window; vLLM v1's
  // SlidingWindowManager.remove_skipped_blocks): when a sequence is
  // scheduled, its blocks wholly before the window of its next query
  // (positions < num_computed_tokens - sliding_window + 1, which no kernel
  // reads) are released and their entries become kNoBlock, so a long
  // context holds about sliding_window / block_size blocks. The last full
  // block (and, with prefix caching, the last recorded one: the parent of
  // the next record's chain hash) is always kept. A sequence that released
  // blocks is preempted by recompute, never swapped. 0: nothing released.
  int64_t sliding_window = 0;
  // --preemption-mode; unset: vLLM v0's rule (preemption_mode.h). Swap
  // needs the Scheduler's HostBlockPool (without one: recompute).
  std::optional<PreemptionMode> preemption_mode;
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
  // Copies before the step (ModelRunner::apply_swaps, after swap_out and
  // before swap_in): a cached partial block into the block of a sequence
  // that continues it. Each src is pinned until postprocess(this output).
  std::vector<BlockCopy> block_copies;
  // Swaps before the step, swap_out first (ModelRunner::apply_swaps): the
  // blocks of sequences preempted by swap this step, and those of
  // sequences swapped back in. Never both non-empty.
  std::vector<BlockSwap> swap_out;
  std::vector<BlockSwap> swap_in;
  int64_t num_prefill_tokens = 0;   // tokens of sequences not yet decoding
  int64_t num_decode_tokens = 0;
  int64_t num_preempted = 0;    // by recompute or by swap
  int64_t num_swapped_out = 0;  // of those, by swap
  int64_t num_swapped_in = 0;   // sequences swapped back in
  // Sequences finished while scheduling (alone and still out of KV blocks:
  // "length"): one update each, for the OutputProcessor.
  std::vector<SequenceUpdate> finished;
  bool empty() const { return seqs.empty(); }
  // Logits rows (and tokens to sample) of the step: sequences with
  // samples == true.
  int64_t num_samples() const;
};

struct PostprocessResult {
  int64_t num_generated = 0;  // tokens appended
  // One per appended token, in schedule order.
  std::vector<SequenceUpdate> updates;
};

class Scheduler {
 public:
  // host: the swap space's blocks (outlives the Scheduler); null = none, so
  // every preemption recomputes.
  Scheduler(SchedulerConfig config, BlockManager& blocks, HostBlockPool* host = nullptr);
  ~Scheduler();

  // Queues a new request of one sequence (waiting). Its request id must not
  // be in use (contains() first); throws std::invalid_argument otherwise.
  void add(std::unique_ptr<Sequence> seq);
  // Queues a request of group->best_of sequences (seqs[i]->index == i,
  // 1 <= n <= best_of), each waiting in index order; throws
  // std::invalid_argument on a used id or a malformed group.
  void add_group(std::unique_ptr<SequenceGroup> group);
  bool contains(const std::string& request_id) const { return groups_.count(request_id) != 0; }
  // Aborts a request's waiting or running sequences: frees all their
  // blocks and forgets the request (its deltas: OutputProcessor::abort).
  // False when the id is unknown.
  bool abort(const std::string& request_id);
  // Aborts every listed request as abort() does (unknown or repeated ids
  // are skipped) and returns how many were aborted. Time O(k log G + W + R)
  // for k ids, G requests held, W waiting and R running sequences: the
  // aborted sequences are marked first and leave the waiting and running
  // queues in one pass each (not one pass per request: 300,000 aborts of
  // 300,000 queued requests took minutes that way, issue 12).
  int64_t abort(std::span<const std::string> request_ids);
  // Aborts everything (engine shutdown). Returns how many were aborted.
  int64_t abort_all();
  // Ends sample `index` of a request whose text a stop string ended
  // (OutputProcessor::Result::stopped): finishes it "stop" and frees its
  // blocks as a token-level finish does; returns the updates of what
  // finished (none when the id, the index or the sequence is already gone
  // or finished).
  std::vector<SequenceUpdate> stop(const std::string& request_id, int index);
  // Requests admitted none of whose sequences has been scheduled yet
  // (queued and never started; a preempted request does not count again).
  int64_t num_unstarted() const { return num_unstarted_; }

  SchedulerOutput schedule();
  // sampled: out.num_samples() tokens, one per sequence with samples ==
  // true, in schedule order. Throws std::logic_error on a count mismatch.
  PostprocessResult postprocess(const SchedulerOutput& out, std::span<const TokenLogprob> sampled);
  // The same without logprobs (cumulative_logprob stays 0).
  PostprocessResult postprocess(const SchedulerOutput& out, std::span<const int32_t> sampled);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  // Sequences preempted by swap and not yet swapped back in.
  int64_t num_swapped() const { return static_cast<int64_t>(swapped_.size()); }
  // Sequences swapped out / in since start, and preemptions that chose swap
  // but recomputed because the host pool had no room.
  int64_t num_swap_outs_total() const { return num_swap_outs_total_; }
  int64_t num_swap_ins_total() const { return num_swap_ins_total_; }
  int64_t num_swap_fallbacks_total() const { return num_swap_fallbacks_total_; }
  bool has_unfinished() const { return !groups_.empty(); }
  int64_t num_preemptions_total() const { return num_preemptions_total_; }
  // Prefix caching: tokens of admitted sequences looked up in the cache, and
  // those found (vLLM's prefix_cache_queries / prefix_cache_hits).
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  const SchedulerConfig& config() const { return config_; }
  // Checks (tests, the simulation): the BlockManager's own invariants; each
  // block's reference count equals the number of sequence tables holding
  // it; a finished, waiting or swapped sequence holds no device blocks; a
  // running one's table covers its computed tokens; the recorded blocks of a
  // table hold that sequence's tokens; the HostBlockPool's own invariants;
  // a swapped sequence holds one host block per block of its computed
  // tokens, every other none, and the host blocks in use are exactly those
  // held. Throws std::logic_error naming the first violation.
  void check_invariants() const;

 private:
  // Frees seq's blocks (device and host): its tables, recorded-block count
  // and computed tokens go back to none (preemption, retirement, an
  // admission that did not fit).
  void release_blocks(Sequence* seq);
  // Preempts a running sequence (already out of running_) by recompute or
  // by swap, as preemption_mode and the host pool's room decide.
  void preempt(Sequence* seq, SchedulerOutput& out);
  // The warning of the 1st, 51st, 101st, ... preemption (vLLM v0's
  // scheduler logs every 50th): the request, the mode taken, the count.
  void warn_preemption(const Sequence& seq, PreemptionMode mode) const;
  // vLLM v0's mode for seq when the flag is unset: swap when its request
  // has several unfinished sequences (max_running_seqs > 1).
  PreemptionMode mode_for(const Sequence* seq) const;
  // Swap-out (true) or false when the host pool lacks the blocks.
  bool swap_out(Sequence* seq, SchedulerOutput& out);
  // Swaps the front of swapped_ back in with the slots of its next n tokens
  // and returns true, or changes nothing and returns false when the device
  // blocks are short.
  bool swap_in(Sequence* seq, int64_t n, SchedulerOutput& out);
  // Gives seq the blocks for its first `need` tokens and records the full
  // ones (in the prefix cache when it caches; this step's records are
  // listed in recorded_ until postprocess).
  void allocate(Sequence* seq, int64_t need);
  // Releases seq's blocks that no future query of it reads
  // (SchedulerConfig::sliding_window); a no-op without a window.
  void release_out_of_window(Sequence* seq);
  // Appends one sampled token and its update; on a finish, retires the
  // sequence.
  void append(Sequence* seq, const TokenLogprob& t, PostprocessResult* res);
  // For a sequence already marked finished: frees its blocks, appends its
  // finish update to `updates` (when given) and, when the whole group is
  // done, marks it for reap().
  void retire(Sequence* seq, std::vector<SequenceUpdate>* updates);
  void reap();  // forgets finished groups

  SchedulerConfig config_;
  StopConfig stop_config_;
  BlockManager& blocks_;
  std::map<std::string, std::unique_ptr<SequenceGroup>> groups_;
  std::vector<std::string> done_;  // finished groups to forget
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  // Preempted by swap, in swap-out order (a step's victims in admission
  // order); swapped_insert_ is where this step's victims go.
  std::deque<Sequence*> swapped_;
  size_t swapped_insert_ = 0;
  HostBlockPool* host_ = nullptr;
  int64_t num_preemptions_total_ = 0;
  int64_t num_swap_outs_total_ = 0;
  int64_t num_swap_ins_total_ = 0;
  int64_t num_swap_fallbacks_total_ = 0;
  bool warned_swap_fallback_ = false;
  // Sources of this step's block copies, pinned from schedule() to postprocess().
  std::vector<int32_t> pinned_;
  // Blocks recorded in the prefix cache by this step's schedule(), before
  // the forward computes them; cleared by postprocess (forgotten by the
  // next schedule() when the step failed).
  std::vector<int32_t> recorded_;
  int64_t num_unstarted_ = 0;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace pagoda
