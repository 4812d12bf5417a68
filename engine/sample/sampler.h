// Sampler: picks one token from one row of logits, with vLLM's sampling
// semantics (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py,
// ops/penalties.py). Order of operations:
//  1. penalties on the raw logits: repetition_penalty (CTRL, Keskar et al.
//     2019: a token seen in the prompt or output has its logit divided by the
//     penalty when positive, multiplied when negative), then frequency_penalty
//     (minus penalty x count in the output) and presence_penalty (minus
//     penalty once if present in the output) as in OpenAI's API;
//  2. min_tokens: `suppress_ids` (EOS, stop_token_ids) get -inf;
//  3. greedy (temperature < 1e-5): argmax, ties to the lowest id;
//  4. else logits / temperature → softmax; min_p drops tokens whose
//     probability is below min_p x the top probability; top_k keeps the k
//     most likely (ties at the k-th value kept); top_p keeps the smallest
//     most-likely-first set whose mass reaches top_p (nucleus sampling,
//     Holtzman et al. 2019); one uniform draw from `rng` picks a token by
//     inverse CDF over the kept tokens in id order.
// Each sequence owns its rng, so a seeded request samples the same tokens
// whatever else is in the batch.
#pragma once
#include <cstdint>
#include <random>
#include <span>

#include "engine/sample/sampling_params.h"

namespace pagoda {

struct SampleInput {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_ids;   // for repetition_penalty
  std::span<const int32_t> output_ids;   // for all three penalties
  std::span<const int32_t> suppress_ids; // ids banned this step (min_tokens)
  std::mt19937_64* rng = nullptr;        // used when not greedy
};

class Sampler {
 public:
  // logits: one row of [vocab] F32 values, modified in place (scratch).
  // Returns the chosen id in [0, vocab). Throws std::invalid_argument on an
  // empty row or a missing params/rng.
  static int32_t sample(std::span<float> logits, const SampleInput& in);

  // Steps 1-2 only (exposed for tests).
  static void apply_penalties(std::span<float> logits, const SampleInput& in);
  // Argmax, ties to the lowest id.
  static int32_t argmax(std::span<const float> logits);
  // A uniform double in [0, 1) from 53 random bits of rng (portable, unlike
  // std::uniform_real_distribution).
  static double uniform(std::mt19937_64& rng);
};

}  // namespace pagoda
