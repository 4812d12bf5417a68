// Engine: the one engine thread and its step loop (design card §2; nano-vllm's
// LLMEngine.step()). Each step: drain the request queue (adds, aborts) →
// Scheduler::schedule() → ModelRunner builds the ForwardBatch and runs the
// ModelExecutor → Sampler → Scheduler::postprocess() (append, stop checks,
// free finished sequences' blocks) → Detokenizer → OutputChannel deltas.
//
// Thread safety: add_request/abort_request/stats may be called from any
// thread (the queue is lock-free multi-producer). step() runs on the engine
// thread only (start()) or on the caller's thread when not started (tests,
// offline generation).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/model_executor.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

struct EngineConfig {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_model_len = 2048;
  double log_stats_interval_s = 5.0;  // 0 = no periodic stats log line
  bool log_stats = true;
  std::vector<int32_t> eos_token_ids;  // generation_config.json's (list)
  // vLLM's --seed: the engine's global seed. A request without its own seed
  // samples from mix_seed(seed + k) (splitmix64), k counting the sequences
  // admitted so far; so one seed replays the same outputs for the same
  // unseeded requests in the same order (as vLLM seeds its global RNG).
  uint64_t seed = 0;
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
  void abort_request(const std::string& request_id);

  // Engine thread (or the caller's when not started): one iteration.
  // Returns false when there was nothing to do.
  bool step();
  // Runs steps until every request added so far has finished (not started).
  void run_until_idle();

  // Any thread: the latest published snapshot.
  EngineStats stats() const;
  const EngineConfig& config() const;
  int64_t num_kv_blocks() const;
  int64_t block_size() const;

 private:
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace pagoda
