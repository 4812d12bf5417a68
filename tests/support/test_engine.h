// An Engine over a model directory for tests: the executor's limits
// (max_model_len, max_num_seqs, max_num_batched_tokens) are the engine's,
// stats logging is off, and the EOS ids are the model's
// generation_config.json's (what `pagoda serve` does). Header-only; used by
// the unit and GPU test binaries.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/output_channel.h"

namespace pagoda::test {

// The small model every engine test runs: the bundled stories260K
// (models/stories260K, llama2.c's; references in shared/testvectors).
inline const std::string& stories_dir() {
  static const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/models/stories260K";
  return dir;
}

// Options for stories260K on `device` with small limits: 1 CPU thread,
// blocks of 16, max_model_len 128, 8 sequences, 128 batched tokens, the
// default KV size. Callers change what their test is about.
inline ExecutorOptions stories_options(const std::string& device = "cpu") {
  ExecutorOptions o;
  o.model_dir = stories_dir();
  o.device = device;
  o.num_threads = 1;
  o.block_size = 16;
  o.max_model_len = 128;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 128;
  return o;
}

// The engine over `opts` (see above); `seed` is EngineConfig::seed (--seed),
// max_prompt_logprob_tokens and enable_prefix_caching EngineConfig's.
// Throws what make_model_executor / load_tokenizer throw.
// The EngineConfig make_test_engine uses (before its own arguments).
inline EngineConfig test_engine_config(const ExecutorOptions& opts) {
  EngineConfig cfg;
  cfg.max_model_len = opts.max_model_len;
  cfg.max_num_seqs = opts.max_num_seqs;
  cfg.max_num_batched_tokens = opts.max_num_batched_tokens;
  cfg.log_stats = false;
  cfg.eos_token_ids = GenerationConfig::from_dir(opts.model_dir).eos_token_ids;
  return cfg;
}

// The engine over `opts` with `cfg` as given (test_engine_config's, edited).
inline std::unique_ptr<Engine> make_test_engine(const ExecutorOptions& opts,
                                                const EngineConfig& cfg) {
  return std::make_unique<Engine>(cfg,
                                  make_model_executor(ModelConfig::from_dir(opts.model_dir), opts),
                                  load_tokenizer(opts.model_dir));
}

inline std::unique_ptr<Engine> make_test_engine(const ExecutorOptions& opts, uint64_t seed = 0,
                                                int64_t max_prompt_logprob_tokens = 256,
                                                bool enable_prefix_caching = true) {
  EngineConfig cfg = test_engine_config(opts);
  cfg.enable_prefix_caching = enable_prefix_caching;
  cfg.max_prompt_logprob_tokens = max_prompt_logprob_tokens;
  cfg.seed = seed;
  return make_test_engine(opts, cfg);
}

// Queues a greedy (temperature 0), ignore_eos request of max_tokens tokens
// on `e`; returns its output channel.
inline std::shared_ptr<OutputChannel> add_greedy_request(Engine& e, std::string id,
                                                         std::vector<int32_t> prompt,
                                                         int64_t max_tokens) {
  auto req = std::make_unique<GenerateRequest>();
  req->request_id = std::move(id);
  req->prompt_token_ids = std::move(prompt);
  req->sampling.temperature = 0.0f;
  req->sampling.ignore_eos = true;
  req->sampling.max_tokens = max_tokens;
  req->output = std::make_shared<OutputChannel>();
  auto ch = req->output;
  e.add_request(std::move(req));
  return ch;
}

}  // namespace pagoda::test
