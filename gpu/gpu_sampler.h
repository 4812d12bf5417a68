// GpuSampler: picks one token per logits row on the GPU, so a step copies
// back token ids instead of a [rows, vocab] F32 matrix.
//
// Semantics follow the CPU Sampler (engine/sample/sampler.h; vLLM's
// topk_topp_sampler) without penalties, logit_bias or logprobs (those rows
// stay on the CPU path):
//  * temperature < 1e-5: argmax, ties to the lowest id (bitwise the same
//    choice as Sampler::argmax on the same logits);
//  * else x = logits / temperature; min_p keeps x >= max(x) + log(min_p);
//    top_k keeps x >= the k-th largest x (ties kept); top_p keeps the
//    smallest most-likely-first set whose softmax mass over what top_k/min_p
//    kept reaches top_p (Holtzman et al. 2019; ties at the boundary kept).
//    The thresholds are found exactly by a 32-step radix select over the
//    order-preserving bit patterns of x (no sort).
//  * the draw is the Gumbel-max trick (argmax of x_i + G_i, G_i =
//    -log(-log U_i), exact sampling from the renormalised softmax) with U_i
//    from Philox4x32-10 (Salmon et al., SC'11, "Parallel random numbers: as
//    easy as 1, 2, 3"), key = the row's 64-bit seed, counter = token id / 4:
//    the same seed and logits give the same token on any batch.
// One CTA of 1024 threads per row.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/model/backend.h"

namespace pagoda::cuda {

struct GpuSampleParams {
  float temperature = 0.f;  // < 1e-5: greedy
  int32_t top_k = 0;        // <= 0 or >= vocab: off
  float top_p = 1.f;        // (0, 1]; 1: off
  float min_p = 0.f;        // [0, 1]; 0: off
  uint64_t seed = 0;        // Philox key for this row and step
};
static_assert(sizeof(GpuSampleParams) == 24, "GpuSampleParams is copied to the device as is");

class GpuSampler {
 public:
  // backend must be the CUDA backend (else std::invalid_argument).
  explicit GpuSampler(Backend& backend);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // logits: [rows >= params.size(), vocab] F32 on the device; samples the
  // first params.size() rows. ids gets params.size() ids in [0, vocab).
  // Waits for the result. Throws std::invalid_argument on a bad shape or
  // parameter (temperature < 0, top_p outside (0, 1], min_p outside [0, 1]).
  void sample(const Tensor& logits, const std::vector<GpuSampleParams>& params, std::vector<int32_t>& ids);

 private:
  Backend& backend_;
  void* host_ = nullptr;    // pinned: params then ids
  void* dev_ = nullptr;     // device: params then ids
  int64_t cap_rows_ = 0;
};

}  // namespace pagoda::cuda
