// ForwardingExecutor: a ModelExecutor that passes every call to another one
// it owns — the base of decorators that change one thing (pagoda_gpu_bench's
// step timer, tests that hide the sliding window).
#pragma once
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_executor.h"

namespace pagoda {

class ForwardingExecutor : public ModelExecutor {
 public:
  // inner must not be null (std::invalid_argument).
  explicit ForwardingExecutor(std::unique_ptr<ModelExecutor> inner) : inner_(std::move(inner)) {
    if (!inner_) throw std::invalid_argument("ForwardingExecutor: no executor");
  }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int64_t block_size() const override { return inner_->block_size(); }
  int64_t num_host_kv_blocks() const override { return inner_->num_host_kv_blocks(); }
  int64_t uniform_sliding_window() const override { return inner_->uniform_sliding_window(); }
  void swap_out(std::span<const BlockSwap> p) override { inner_->swap_out(p); }
  void swap_in(std::span<const BlockSwap> p) override { inner_->swap_in(p); }
  void copy_blocks(std::span<const BlockCopy> c) override { inner_->copy_blocks(c); }
  void execute(const ForwardBatch& b, std::vector<float>& logits) override {
    inner_->execute(b, logits);
  }
  int64_t num_cuda_graphs() const override { return inner_->num_cuda_graphs(); }
  int64_t num_graph_replays() const override { return inner_->num_graph_replays(); }
  bool can_sample_on_device() const override { return inner_->can_sample_on_device(); }
  void execute_and_sample(const ForwardBatch& b, const DeviceSamplingBatch& s,
                          std::vector<TokenLogprob>& out) override {
    inner_->execute_and_sample(b, s, out);
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<ModelExecutor> inner_;
};

}  // namespace pagoda
