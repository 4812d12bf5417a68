// A model on the CUDA backend for the GPU model tests: config, backend,
// weights, paged KV cache and workspace, and a forward that returns the
// logits rows on the host (the CUDA twin of tests/unit/model_test_helpers.h's
// CpuModel).
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/backend.h"
#include "engine/model/forward_batch.h"
#include "engine/model/llama.h"
#include "engine/model/model_config.h"
#include "gpu/cuda_backend.h"

namespace pagoda::gputest {

struct GpuModel {
  ModelConfig config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
  // num_blocks blocks of 16 tokens; max_tokens: the most tokens one forward takes.
  GpuModel(const std::string& dir, DType dt, int64_t num_blocks, int64_t max_tokens)
      : GpuModel(dir, ModelConfig::from_dir(dir), dt, num_blocks, max_tokens) {}
  // With a config read from dir and then adjusted (a reference's rotary
  // buffers reproduced: ModelConfig::rope_inv_freq_bf16 / rope_table_bf16).
  GpuModel(const std::string& dir, ModelConfig cfg, DType dt, int64_t num_blocks,
           int64_t max_tokens)
      : config(std::move(cfg)), backend(make_cuda_backend(0, dt)) {
    model = std::make_unique<LlamaModel>(config, *backend);
    model->load_weights(dir);
    model->allocate_kv_cache(num_blocks, 16);
    model->allocate_workspace(max_tokens, 64,
                              std::min<int64_t>(config.max_position_embeddings, 4096));
  }
  // Runs `batch`; returns its logits rows [rows, vocab] fp32 on the host.
  std::vector<float> run(const ForwardBatch& batch) {
    Tensor t = model->forward(backend->upload_batch(batch));
    std::vector<float> out(static_cast<size_t>(t.numel()));
    backend->copy_to_host(out.data(), t);
    return out;
  }
};

}  // namespace pagoda::gputest
