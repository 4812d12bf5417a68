// DecodeGraphs: CUDA graphs of the model's decode step for a fixed set of
// batch sizes (vLLM's CUDAGraphRunner: sizes 1, 2, 4, 8, then multiples of 8
// up to max_num_seqs). A decode batch of B sequences is padded to the next
// captured size; the step's metadata is uploaded into the backend's fixed
// buffers (CudaBackend::reserve) and the graph is replayed over them.
//
// What makes replay equal to the eager step: every kernel reads its
// per-sequence lengths from device memory; the scalars baked into the graph
// (token/sequence counts, block-table stride, the Flash-Decoding grid for
// max_context_len = max_model_len) are the padded batch's, and the decode
// attention writes a sequence's output the same way whatever the grid. The
// padded rows hold token 0 at position 0, slot -1 (rope_and_cache skips
// negative slots: they write nothing) and context length 1 reading block 0.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/model/backend.h"

namespace pagoda::cuda {

class DecodeGraphs {
 public:
  // The model step: runs the forward on the backend's stream and returns the
  // logits tensor (a fixed workspace buffer).
  using ForwardFn = std::function<Tensor(const DeviceBatch&)>;

  // backend must be the CUDA backend (else std::invalid_argument).
  DecodeGraphs(Backend& backend, ForwardFn forward);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // The decode batch sizes vLLM captures (VllmConfig's default
  // cudagraph_capture_sizes: 1, 2, 4, then multiples of 8 below 256 and of
  // 16 from 256) up to min(max_num_seqs, 512), vLLM's largest capture size;
  // that cap itself is added when it is not on the list. Larger decode
  // batches run eagerly, as in vLLM.
  static std::vector<int64_t> capture_sizes(int64_t max_num_seqs);
  static constexpr int64_t kMaxCaptureSize = 512;

  // Captures one graph per size (largest first) for decode batches with a
  // block table of max_blocks_per_seq columns. Reserves the backend buffers
  // first, for steps of up to max_num_seqs sequences (>= every size; the
  // larger ones run eagerly) and max_num_batched_tokens tokens. Logs the
  // sizes, time and device memory taken.
  void capture(const std::vector<int64_t>& sizes, int64_t max_num_seqs,
               int64_t max_num_batched_tokens, int64_t max_blocks_per_seq, int64_t max_model_len,
               int num_heads, int head_dim);

  // The smallest captured size for `batch`, or 0 when it is not a decode
  // batch a graph can run (a token per sequence, one logits row per
  // sequence in order, at most the captured block-table width), none is
  // large enough, or the graphs were invalidated (a backend buffer moved).
  int64_t padded_size(const ForwardBatch& batch) const;

  // Pads a decode-only batch (every sequence one token, one logits row each,
  // in order) to `size` rows with max_blocks_per_seq columns.
  ForwardBatch pad(const ForwardBatch& batch, int64_t size) const;

  // Uploads `padded` (from pad()) and replays its graph; returns the logits
  // tensor [size, vocab] F32 (rows past the real batch are padding).
  Tensor replay(const ForwardBatch& padded);

  int64_t num_graphs() const { return static_cast<int64_t>(graphs_.size()); }

 private:
  struct Graph {
    int64_t size = 0;
    void* exec = nullptr;  // cudaGraphExec_t
    Tensor logits;         // what the captured forward returned
  };
  ForwardBatch dummy(int64_t size) const;
  const Graph* find(int64_t size) const;
  Backend& backend_;
  ForwardFn forward_;
  std::vector<Graph> graphs_;  // ascending size
  int64_t max_blocks_per_seq_ = 0;
  uint64_t generation_ = 0;
  bool valid_ = false;
};

}  // namespace pagoda::cuda
