// Engine: the one engine thread and its step loop (design card §2; nano-vllm's
// LLMEngine.step()). Each step: drain the request queue (adds, aborts) →
// Scheduler::schedule() → ModelRunner builds the ForwardBatch and runs the
// ModelExecutor → Sampler → Scheduler::postprocess() (append, token-level
// stop checks, free finished sequences' blocks; one SequenceUpdate per
// token) → OutputProcessor (detokenization, stop strings, which end their
// sequences through Scheduler::stop, logprobs, best_of choices, the
// OutputChannel deltas).
//
// Thread safety: add_request(s)/abort_request(s)/stats/heartbeat may be called from any
// thread (the queue is lock-free multi-producer). step() runs on the engine
// thread only (start()) or on the caller's thread when not started (tests,
// offline generation).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/model_executor.h"
#include "engine/request.h"
#include "engine/sched/preemption_mode.h"
#include "engine/stats.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

struct EngineConfig {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_model_len = 2048;
  double log_stats_interval_s = 5.0;  // 0 = no periodic stats log line
  bool log_stats = true;
  // One info line per finished request with its engine-side timings
  // ("Finished request ID: prompt_tokens=N ttft_ms=X e2e_ms=Y", times from
  // the request's arrival at the engine); serve's --enable-log-requests.
  bool log_requests = false;
  std::vector<int32_t> eos_token_ids;  // generation_config.json's (list)
  // vLLM's --seed: the engine's global seed. A request without its own seed
  // samples from mix_seed(seed + k) (splitmix64), k counting the sequences
  // admitted so far; so one seed replays the same outputs for the same
  // unseeded requests in the same order (as vLLM seeds its global RNG).
  uint64_t seed = 0;
  // --max-num-waiting-requests: how many requests may wait for their first
  // step (queued or in the scheduler's waiting queue, never yet scheduled)
  // before try_add_requests() refuses more; 0 = no bound.
  int64_t max_num_waiting_requests = 0;
  // Prompt positions scored for prompt_logprobs per step (the scheduler
  // prefills such a prompt in chunks of at most this many tokens): bounds
  // the [positions, vocab] fp32 logits one step holds — on the host when
  // the CPU backend scores them (one 4000-token Qwen2 prompt took 2.4 GB at
  // once; 256 rows are ~155 MB), on the device as score rows with CUDA.
  int64_t max_prompt_logprob_tokens = 256;
  // --long-prefill-token-threshold (SchedulerConfig): > 0 caps one
  // sequence's prefill tokens per step; 0 = off.
  int64_t long_prefill_token_threshold = 0;
  // --max-prefill-tokens-with-decodes (SchedulerConfig): > 0 caps the
  // prompt tokens of a step that carries decodes; 0 = off.
  int64_t max_prefill_tokens_with_decodes = 0;
  // --enable-prefix-caching / --no-enable-prefix-caching (vLLM v1: on by
  // default): full KV blocks are kept by the hash of their tokens and every
  // token before them, and a new sequence starts from the longest cached
  // run of its leading blocks (engine/kv/block_manager.h, scheduler.h).
  bool enable_prefix_caching = true;
  // --preemption-mode (engine/sched/preemption_mode.h): recompute or swap;
  // unset = vLLM v0's rule (recompute for a request with one running
  // sequence, swap for several). Swap uses the executor's swap space
  // (ExecutorOptions::swap_space_bytes, --swap-space); where it is full or
  // absent the sequence is preempted by recompute.
  std::optional<PreemptionMode> preemption_mode;
  // Tests: Scheduler::check_invariants() after every schedule and
  // postprocess (a violation throws std::logic_error out of step()).
  bool check_invariants = false;
};

// The engine thread's progress, for liveness checks (/health). Times are
// steady_clock.
struct EngineHeartbeat {
  // The end of the last step (or the engine's construction).
  std::chrono::steady_clock::time_point last_step_end;
  // Set while a step runs: when it began.
  std::optional<std::chrono::steady_clock::time_point> step_began;
  // At the end of the last step: requests were queued or unfinished.
  bool has_work = false;
  // Requests admitted and never yet scheduled (the bound above counts these).
  int64_t num_waiting = 0;
  // True when a step has been running for longer than `timeout`, or the
  // engine had work at its last step's end and has not stepped for longer
  // than `timeout` since.
  bool stalled(std::chrono::steady_clock::time_point now,
               std::chrono::steady_clock::duration timeout) const {
    if (step_began) return now - *step_began > timeout;
    return has_work && now - last_step_end > timeout;
  }
};

// try_add_requests()'s answer.
enum class Admission {
  kAccepted,
  kQueueFull,     // max_num_waiting_requests reached: nothing was queued
  kTooLarge,      // more requests at once than max_num_waiting_requests
  kShuttingDown,  // (EngineAdapter) the server takes no new requests
};

class EngineImpl;

class Engine {
 public:
  Engine(EngineConfig config, std::unique_ptr<ModelExecutor> executor,
         std::shared_ptr<const Tokenizer> tokenizer);
  ~Engine();  // stops the engine thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts / stops the engine thread. stop() aborts nothing; unfinished
  // requests get an "abort" delta.
  void start();
  void stop();

  // Any thread. Requests whose prompt + max_tokens cannot fit max_model_len
  // or the whole KV cache finish at once with an error delta (the server
  // validates first; this is the engine's own guard).
  void add_request(std::unique_ptr<GenerateRequest> request);
  // Any thread: all or nothing. Accepted: every request is queued as by
  // add_request() (each then counts as waiting until first scheduled).
  // Otherwise nothing is queued and `requests` are left as they were. The
  // bound is a single atomic counter reserved with compare-and-swap, so
  // concurrent callers can never overshoot it together.
  Admission try_add_requests(std::vector<std::unique_ptr<GenerateRequest>>& requests);
  void abort_request(const std::string& request_id);
  // Any thread: one command aborting them all; the engine thread removes
  // them in one pass (Scheduler::abort(span)): O(k + held), not O(k x held).
  void abort_requests(std::vector<std::string> request_ids);

  // Engine thread (or the caller's when not started): one iteration.
  // Returns false when there was nothing to do.
  bool step();
  // Runs steps until every request added so far has finished (not started).
  void run_until_idle();

  // Any thread: the latest published snapshot.
  EngineStats stats() const;
  // Any thread: the engine thread's progress now.
  EngineHeartbeat heartbeat() const;
  // Any thread: nothing queued, no step running, and the last step ended
  // with no unfinished request. (Once nothing more is added, stays true.)
  bool idle() const;
  const EngineConfig& config() const;
  int64_t num_kv_blocks() const;
  int64_t block_size() const;

 private:
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace pagoda
