// Helpers for the tensor-parallel tests: a CPU executor at a given
// tensor_parallel_size, logits comparisons, greedy decoding.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {

// With a config read from dir and then changed by the caller.
inline std::unique_ptr<ModelExecutor> cpu_executor(const std::string& dir,
                                                   const ModelConfig& config, int tp,
                                                   int threads = 2) {
  ExecutorOptions o;
  o.model_dir = dir;
  o.device = "cpu";
  o.block_size = 16;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 256;
  o.max_model_len = 512;
  o.kv_cache_memory_bytes = size_t{16} << 20;
  o.num_threads = threads;
  o.tensor_parallel_size = tp;
  return make_model_executor(config, o);
}

inline std::unique_ptr<ModelExecutor> cpu_executor(const std::string& dir, int tp,
                                                   int threads = 2) {
  return cpu_executor(dir, ModelConfig::from_dir(dir), tp, threads);
}

// max |a - b| / max |b| over all elements.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / den;
}

inline int32_t argmax_row(const std::vector<float>& v, int64_t row, int64_t V) {
  const float* p = v.data() + row * V;
  return static_cast<int32_t>(std::max_element(p, p + V) - p);
}

// Greedy decoding of n ids after `prompt` on one sequence through the paged
// cache (blocks 0, 1, ... of 16 tokens): the prompt's prefill, then one
// token a step, n forwards in all. Each forward's batch and logits go to
// `on_forward` (when set) before the next id is taken from them, so a test
// can run another executor on the same batches (teacher-forced).
inline std::vector<int32_t> greedy_ids(
    ModelExecutor& ex, const std::vector<int32_t>& prompt, size_t n,
    const std::function<void(const ForwardBatch&, const std::vector<float>&)>& on_forward = {}) {
  const int64_t V = ex.vocab_size();
  const auto max_blocks = static_cast<int32_t>((prompt.size() + n + 15) / 16);
  std::vector<float> logits;
  std::vector<int32_t> ids;
  auto pos = static_cast<int32_t>(prompt.size());
  for (size_t i = 0; i < n; ++i) {
    const ForwardBatch batch = i == 0 ? one_seq_batch(prompt, 0, 0, max_blocks)
                                      : one_seq_batch({ids.back()}, pos++, 0, max_blocks);
    ex.execute(batch, logits);
    if (on_forward) on_forward(batch, logits);
    ids.push_back(argmax_row(logits, 0, V));
  }
  return ids;
}

}  // namespace pagoda::test
