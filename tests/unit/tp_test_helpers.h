// Helpers for the tensor-parallel tests: a CPU executor at a given
// tensor_parallel_size, and a mixed prefill + decode batch.
#pragma once
#include <algorithm>
#include <cmath>
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

}  // namespace pagoda::test
