// Sampler: picks one token from one row of logits, with vLLM v1's sampling
// semantics (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py,
// ops/penalties.py, logits_processor builtins). Order of operations:
//  0. logprobs (when wanted, see wants_logprob()): the raw model
//     log-softmax of the row, before anything below (vLLM's default
//     logprobs_mode "raw_logprobs");
//  1. allowed_token_ids (vLLM): when set, every other id gets -inf; a
//     guided-decoding mask (engine/guided/guide.h) likewise: ids outside it
//     get -inf, except `eos_ids` when the automaton state accepts or allows
//     no text token (a constraint the vocabulary cannot continue ends);
//     logit_bias: bias[id] added to the logit (OpenAI logit_bias);
//  2. `suppress_ids` get -inf: min_tokens' EOS and stop_token_ids, and the
//     bad words' bans (engine/sample/bad_words.h), gathered by the caller;
//  3. penalties: repetition_penalty (CTRL, Keskar et al. 2019: a token seen
//     in the prompt or output has its logit divided by the penalty when
//     positive, multiplied when negative), then frequency_penalty (minus
//     penalty x count in the output) and presence_penalty (minus penalty
//     once if present in the output) as in OpenAI's API;
//  4. greedy (temperature < 1e-5): argmax, ties to the lowest id;
//  5. else logits / temperature → softmax; min_p drops tokens whose
//     probability is below min_p x the top probability; top_k keeps the k
//     most likely (ties at the k-th value kept); top_p keeps the smallest
//     most-likely-first set whose mass reaches top_p (nucleus sampling,
//     Holtzman et al. 2019), renormalised over what min_p/top_k kept; one
//     uniform draw from `rng` picks a token by inverse CDF over the kept
//     tokens in id order.
// Each sequence owns its rng, so a seeded request samples the same tokens
// whatever else is in the batch.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/sample/sampling_params.h"

namespace pagoda {

namespace guided {
struct TokenMask;
}  // namespace guided

// Most top logprobs a request may ask for (SamplingParams::logprobs): the
// OpenAI chat API's top_logprobs limit, also vLLM's default max_logprobs.
// Applied to completions' integer `logprobs` too.
inline constexpr int kMaxLogprobs = 20;

struct SampleInput {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_ids;   // for repetition_penalty
  std::span<const int32_t> output_ids;   // for all three penalties
  std::span<const int32_t> suppress_ids; // ids banned this step (min_tokens, bad words)
  std::mt19937_64* rng = nullptr;        // used when not greedy
  // Guided decoding: the text tokens the sequence's automaton state allows
  // (null: unconstrained) and whether the state accepts (then eos_ids are
  // allowed too). When every id ends up at -inf under a mask, sample()
  // returns eos_ids[0] (the output ends) rather than an arbitrary id.
  const guided::TokenMask* guided_mask = nullptr;
  bool guided_accepting = false;
  std::span<const int32_t> eos_ids;
};

class Sampler {
 public:
  // logits: one row of [vocab] F32 values, modified in place (scratch).
  // Returns the chosen id in [0, vocab). Throws std::invalid_argument on an
  // empty row or a missing params/rng.
  static int32_t sample(std::span<float> logits, const SampleInput& in);

  // sample() plus the chosen token's raw log-probability (natural log of the
  // softmax of the row as given, before step 1) and, when params->logprobs
  // = k > 0, the k (capped at kMaxLogprobs) most likely raw tokens, most
  // likely first, ties to the lower id. When wants_logprob(params) is false
  // the logprob is 0 and top is empty (no extra pass over the row).
  static TokenLogprob sample_with_logprobs(std::span<float> logits, const SampleInput& in);

  // True when a request needs per-token logprobs: logprobs asked for, or
  // best_of > n (candidates are ranked by cumulative logprob).
  static bool wants_logprob(const SamplingParams& sp);

  // Raw log-softmax of one row (double precision), for tests and reference.
  static std::vector<double> log_softmax(std::span<const float> logits);

  // Steps 1-3 only (exposed for tests).
  static void apply_penalties(std::span<float> logits, const SampleInput& in);
  // Steps 1-3 and 5's filtering: the probability of each token under the
  // request's settings, the distribution the draw of step 5 uses ([vocab],
  // sums to 1; for greedy, 1 on the argmax). Modifies logits in place.
  static std::vector<double> probabilities(std::span<float> logits, const SampleInput& in);
  // Argmax, ties to the lowest id.
  static int32_t argmax(std::span<const float> logits);
  // A uniform double in [0, 1) from 53 random bits of rng (portable, unlike
  // std::uniform_real_distribution).
  static double uniform(std::mt19937_64& rng);
};

}  // namespace pagoda
