// GpuSampler: every SamplingParams feature of the host Sampler
// (engine/sample/sampler.h) for a whole batch on the GPU, so a step copies
// back token ids (and the logprobs asked for) instead of a [rows, vocab] F32
// matrix. What each row does is described by engine/sample/device_sampling.h
// (DeviceSamplingBatch); one CTA of 1024 threads per output row:
//  0. logprobs (row.logprobs >= 0): log-sum-exp of the raw row; for k > 0
//     the k most likely raw tokens by k bounded arg-max passes (each finds
//     the best token strictly after the previous one in (logit desc, id asc)
//     order: the host's tie order);
//  A score row (row.score_token >= 0: a prompt logprob) stops here, with
//     the token's raw logprob and rank (a block count of logits >= its own);
//  1-4. rows with allowed ids, a guided-decoding mask, bans, logit_bias or a penalty slot are
//     rewritten into a scratch row with the host Sampler's float operations
//     in its order (bitwise the same values: IEEE _rn intrinsics, no FMA
//     contraction); the slot's counts are uint32 per vocabulary id, bit 31 =
//     the id is in the prompt, bits 0-30 = its count in the output;
//  5. greedy: arg-max, ties to the lowest id (== Sampler::argmax). Else
//     x = logit / temperature, min_p keeps x >= max + log(min_p); top_k's
//     k-th largest x is found exactly by an 8-bit radix select over the
//     order-preserving bit patterns (4 passes of shared-memory histograms);
//     top_p: when at most 1024 tokens are kept so far they are sorted in
//     shared memory (x desc, id asc) and the host's cut is applied exactly;
//     otherwise the cut is a 4-pass radix select over fixed-point softmax
//     mass (ties at the cut kept). The draw is the Gumbel-max trick (argmax
//     of x_i + G_i over the kept ids, exact sampling from the renormalised
//     softmax) with U_i from Philox4x32-10 (Salmon et al., SC'11), key = the
//     row's seed, counter = id / 4: the same seed and logits give the same
//     token on any batch. The host draws by inverse CDF from its own RNG, so
//     ids differ but the distribution is the same.
//  6. the sampled id is added to the row's penalty slot on the device.
// Penalty slots persist across calls ([slots, vocab] uint32 on the device,
// grown as needed, contents kept).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/model/backend.h"
#include "engine/request.h"
#include "engine/sample/device_sampling.h"

namespace pagoda::cuda {

class GpuSampler {
 public:
  // backend must be the CUDA backend (else std::invalid_argument). vocab:
  // the logits' width; initial_slots: penalty slots allocated up front
  // (max_num_seqs), [initial_slots, vocab] uint32.
  GpuSampler(Backend& backend, int64_t vocab, int32_t initial_slots = 0);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // logits: [rows, vocab] F32 on the device; every batch row reads
  // logits[src_row]. out gets one TokenLogprob per batch row: token_id, and
  // for rows with logprobs >= 0 the raw logprob and top min(k, vocab)
  // alternatives; score rows (score_token >= 0) return that token, its rank
  // (TokenLogprob::rank) and no draw. Raw logprobs are float32 (log-sum-exp
  // with __expf; tests hold them within 1e-3 of the host's double ones). Waits for the result.
  // Throws std::invalid_argument on a bad shape or parameter (temperature < 0, top_p outside (0,
  // 1], min_p outside [0, 1], repetition_penalty <= 0, logprobs > 20, src_row or a range or id out
  // of bounds, slot >= batch.num_slots, a score row with score_token >= vocab, logprobs < 0, or
  // allow / ban / bias / slot).
  void sample(const Tensor& logits, const DeviceSamplingBatch& batch,
              std::vector<TokenLogprob>& out);

  // Milliseconds of GPU time of the last sample() call's kernels (CUDA events).
  float last_kernel_ms() const { return last_ms_; }
  int32_t num_slots() const { return slots_; }

 private:
  void ensure_slots(int32_t n);
  void ensure_rows(int64_t rows, bool scratch);
  void ensure_staging(size_t bytes);

  Backend& backend_;
  int64_t vocab_ = 0;
  int32_t slots_ = 0;
  uint32_t* counts_ = nullptr;  // device [slots_, vocab]
  float* scratch_ = nullptr;    // device [scratch_rows_, vocab]
  int64_t scratch_rows_ = 0;
  void* out_dev_ = nullptr;   // ids [cap], lps [cap], top ids [cap, 20], top lps [cap, 20]
  void* out_host_ = nullptr;  // pinned mirror
  int64_t out_rows_ = 0;
  void* stage_host_ = nullptr;  // pinned: rows, inits, ids, bias
  void* stage_dev_ = nullptr;
  size_t stage_bytes_ = 0;
  void* ev_[2] = {nullptr, nullptr};  // cudaEvent_t
  float last_ms_ = 0.f;
};

}  // namespace pagoda::cuda
