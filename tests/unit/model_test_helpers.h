// Helpers for the model tests: load a model on the CPU backend and run
// sequences through the paged cache with hand-built ForwardBatches.
#pragma once
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/backend.h"
#include "engine/model/forward_batch.h"
#include "engine/model/llama.h"
#include "engine/model/model_config.h"

namespace pagoda::test {

inline std::string shared_model(const std::string& name) {
  return std::string(PAGODA_SHARED_DIR) + "/models/" + name;
}

struct CpuModel {
  ModelConfig config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
  CpuModel(const std::string& dir, int64_t num_blocks, int64_t max_tokens, int threads = 2)
      : CpuModel(dir, ModelConfig::from_dir(dir), num_blocks, max_tokens, threads) {}
  // With a config read from dir and then changed by the caller.
  CpuModel(const std::string& dir, ModelConfig cfg, int64_t num_blocks, int64_t max_tokens,
           int threads = 2)
      : config(std::move(cfg)), backend(make_cpu_backend(threads)) {
    model = std::make_unique<LlamaModel>(config, *backend);
    model->load_weights(dir);
    model->allocate_kv_cache(num_blocks, 16);
    model->allocate_workspace(max_tokens, 64, std::min<int64_t>(config.max_position_embeddings, 4096));
  }
  // Runs `batch` and returns the logits rows on the host.
  std::vector<float> run(const ForwardBatch& batch) {
    Tensor t = model->forward(backend->upload_batch(batch));
    std::vector<float> out(static_cast<size_t>(t.numel()));
    backend->copy_to_host(out.data(), t);
    return out;
  }
};

// What loading dir on the CPU backend throws ("" when it loads).
inline std::string load_error(const std::string& dir) {
  try {
    CpuModel m(dir, 4, 16);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// One sequence whose block table is first_block, first_block+1, ...: tokens
// `ids` at positions start..start+n-1; logits for `logit_rows` (indices into
// ids) or only the last token when empty.
inline ForwardBatch one_seq_batch(const std::vector<int32_t>& ids, int32_t start, int32_t first_block,
                                  int32_t max_blocks, std::vector<int32_t> logit_rows = {}) {
  constexpr int32_t bs = 16;
  ForwardBatch b;
  const auto n = static_cast<int32_t>(ids.size());
  b.input_ids = ids;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = start + i;
    b.positions.push_back(p);
    b.slot_mapping.push_back((first_block + p / bs) * bs + p % bs);
  }
  b.query_start_loc = {0, n};
  b.context_lens = {start + n};
  b.max_blocks_per_seq = max_blocks;
  for (int32_t k = 0; k < max_blocks; ++k) b.block_tables.push_back(first_block + k);
  if (logit_rows.empty()) logit_rows = {n - 1};
  b.logits_indices = logit_rows;
  return b;
}

// ||a - b|| / ||b||
inline double rel_l2(const float* a, const std::vector<double>& b, size_t offset = 0) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[offset + i]) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace pagoda::test
