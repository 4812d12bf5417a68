// Whole-engine benchmarks on the CUDA backend (bench_engine.cpp): the real
// executor (dummy bf16 weights, KV sized by profiling, CUDA graphs unless
// eager) under the real Engine, driven step by step on this thread.
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

struct EngineBenchOptions {
  std::string model_dir;      // config.json (dummy weights)
  std::string tokenizer_dir;  // "" = ids-only tokenizer (decodes to placeholders)
  std::string label;          // "Llama-2-7B"
  std::string dtype = "bfloat16";  // activations and float weights: bfloat16 | float16
  int offline_requests = 1000;
  // The engine's limits: 256 / 8192 (16384 with the prefill row), the
  // figures recorded since the first session, unless given (vLLM's H200
  // offline defaults are 1024 / 16384: server/batch_defaults.h).
  int max_num_seqs = 256;
  int max_num_batched_tokens = 0;  // 0: 8192, or 16384 with the prefill row
  bool prefill = true;        // 8 x 2048-token prompts
  bool enforce_eager = false;
  int tensor_parallel_size = 1;  // ranks on GPUs 0..N-1 (NCCL)
  // After the greedy offline run, the same with the seeds' Qwen2 sampling
  // settings and with logprobs=5 on every request.
  bool sampling_variants = false;
  bool enable_prefix_caching = true;
  // Multi-turn chat at concurrency 1 (after batch-1 decode): chat_conversations
  // conversations sharing a 1,000-token system prompt, chat_turns turns each
  // (a 100-token user message, 64 tokens of answer; every turn resends the
  // whole conversation), taken round-robin; TTFT p50 / p90 and the prefix
  // cache's hit rate. 0 = not run.
  int chat_conversations = 0;
  int chat_turns = 4;
};

void bench_engine(const EngineBenchOptions& o, std::vector<Row>& rows);

}  // namespace pagoda::bench
