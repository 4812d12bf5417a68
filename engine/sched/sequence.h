// Sequence: one sample's state inside the engine core (vLLM's Sequence /
// nano-vllm's Sequence): its tokens, how many of them are in the KV cache,
// its block table, its sampling state and its token-level finish. Its text,
// stop strings and deltas are the OutputProcessor's (output_processor.h).
// SequenceGroup: one request = best_of sequences sharing the prompt (vLLM
// v0's SequenceGroup). Owned by the Scheduler; engine thread only.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/kv/block_manager.h"
#include "engine/request.h"
#include "engine/sample/sampling_params.h"

namespace pagoda {

struct SequenceGroup;

// kSwapped: preempted by swap (Scheduler): its computed K/V wait in host
// blocks (host_table) and it resumes before any waiting sequence.
enum class SequenceStatus { kWaiting, kRunning, kSwapped, kFinished };

struct Sequence {
  Sequence(const GenerateRequest& req, int64_t max_tokens, uint64_t rng_seed, int index = 0)
      : uid(next_uid()),
        request_id(req.request_id),
        external_request_id(req.external_request_id.empty() ? req.request_id
                                                            : req.external_request_id),
        index(index),
        token_ids(req.prompt_token_ids),
        num_prompt_tokens(static_cast<int64_t>(req.prompt_token_ids.size())),
        sampling(req.sampling),
        max_tokens(max_tokens),
        arrival_time(req.arrival_time),
        cache_root(BlockManager::root_for_salt(req.cache_salt)),
        rng(rng_seed),
        guide_state(req.sampling.guide ? req.sampling.guide->start() : -1) {}

  // Unique for the process's lifetime (a freed Sequence's address may be
  // reused; its uid is not): keys per-sequence device state.
  uint64_t uid = 0;
  std::string request_id;
  std::string external_request_id;  // GenerateRequest's (never empty here)
  // Sample index within the request's group, [0, best_of) (SequenceUpdate::
  // index).
  int index = 0;
  SequenceGroup* group = nullptr;  // set by the Scheduler
  // Prompt followed by the generated tokens.
  std::vector<int32_t> token_ids;
  int64_t num_prompt_tokens = 0;
  SamplingParams sampling;
  int64_t max_tokens = 0;  // resolved (never unset here)
  std::chrono::steady_clock::time_point arrival_time;
  // The prefix cache's chain root for its request's cache salt
  // (BlockManager::root_for_salt): its blocks are looked up and recorded
  // under it.
  uint64_t cache_root = BlockManager::kUnsaltedRoot;

  SequenceStatus status = SequenceStatus::kWaiting;
  // Tokens whose K/V are in the cache. Prefill (chunked or not) and
  // recompute after preemption advance it; num_tokens() - it is what the
  // next step must feed (1 while decoding).
  int64_t num_computed_tokens = 0;
  BlockTable block_table;
  // Blocks of block_table recorded in the prefix cache (BlockManager::
  // cache_full_blocks), from the first; 0 whenever the table is freed.
  int64_t num_cached_blocks = 0;
  // Leading block_table entries released as wholly before the sliding
  // window of every future query (kNoBlock; SchedulerConfig::
  // sliding_window); 0 whenever the table is freed.
  int64_t num_window_released = 0;
  // Prompt tokens found in the prefix cache when the sequence was first
  // scheduled (vLLM v1's Request.num_cached_tokens: set once, not changed
  // by preemption); -1 until then.
  int64_t num_cached_tokens = -1;
  // While kSwapped: the host blocks (HostBlockPool) holding the K/V of its
  // first num_computed_tokens tokens, host_table[k] for table block k; its
  // block_table is then empty. Empty in every other state.
  BlockTable host_table;

  std::mt19937_64 rng;  // per-sequence sampling RNG

  // SamplingParams::prompt_logprobs: entries for prompt positions
  // 1..size(), filled by the group's parent (index 0) as its prefill chunks
  // run (engine/sample/prompt_logprobs.h); kept across preemption, so a
  // recompute does not compute them again. Copied into the update of the
  // parent's first token (SequenceUpdate::prompt_logprobs).
  std::vector<PromptLogprob> prompt_logprobs;

  // SamplingParams::guide's automaton state after the output so far (-1:
  // unconstrained); advanced by append_token.
  int32_t guide_state = -1;

  // Token-level finish (stop_checker.h): length, EOS, a stop_token_ids id
  // (stop_token_id set), a complete guided output; abort. Stop strings are
  // the OutputProcessor's (Scheduler::stop ends the sequence).
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token_id;
  // The last token ended the output as an EOS or a stop_token_ids id (its
  // text is not shown unless include_stop_str_in_output).
  bool stop_terminated = false;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt_ids() const {
    return {token_ids.data(), static_cast<size_t>(num_prompt_tokens)};
  }
  std::span<const int32_t> output_ids() const {
    return {token_ids.data() + num_prompt_tokens, static_cast<size_t>(num_output_tokens())};
  }
  bool finished() const { return status == SequenceStatus::kFinished; }

 private:
  static uint64_t next_uid() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
  }
};

// One request's samples (vLLM v1's parallel sampling: child requests of a
// parent): best_of sequences, each queued, scheduled, preempted and finished
// on its own. They share the prompt's K/V through the prefix cache: the
// blocks a step will fill are recorded when the step is scheduled, so a
// sample admitted in the same step as seqs[0] (behind it in the batch)
// takes its full prompt blocks and computes only the prompt's last partial
// block (Scheduler). Which n of them are returned (best_of > n) is the
// OutputProcessor's.
struct SequenceGroup {
  std::string request_id;
  int n = 1;        // choices returned
  int best_of = 1;  // sequences generated (>= n)
  std::vector<std::unique_ptr<Sequence>> seqs;  // [best_of]
  // Set when one of its sequences is first scheduled (Scheduler::
  // num_unstarted()).
  bool started = false;
  int num_finished = 0;
  // seqs[0]'s prompt logprobs went out on an update (its first token's).
  bool prompt_logprobs_reported = false;
};

}  // namespace pagoda
