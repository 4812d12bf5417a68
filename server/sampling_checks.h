// The checks across SamplingParams fields that vLLM's SamplingParams makes
// when it is built (_verify_args, _verify_greedy_sampling, and v0's
// _verify_beam_search / _verify_non_beam_search), plus the engine's
// max_logprobs bound on them (vLLM's Processor._validate_logprobs; beam
// search asks for its candidates as top logprobs). One implementation for
// every front end: the HTTP and offline parsers (server/openai_request.h,
// on the SamplingParams they resolved with the model) and
// check_sampling_fields, which `pagoda generate` runs before the model loads
// and the Python SamplingParams(...) at construction. Each throws
// openai_fields::RequestFieldError (a 400 naming the field).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/beam_search.h"
#include "engine/sample/sampling_params.h"
#include "server/request_model.h"

namespace pagoda {

// best_of >= n (n >= 1 is the request model's range): "best_of must be
// greater than or equal to n, got n=3 and best_of=2.", param best_of.
void check_best_of(int64_t n, std::optional<int64_t> best_of);

// A beam width whose candidates (beam_candidates(width, num_eos_ids)) are
// more than max_logprobs: 400 naming `param` (best_of, or n when best_of is
// unset) and explaining the bound.
void check_beam_width(int beam_width, size_t num_eos_ids, const char* param, int64_t max_logprobs);

// use_beam_search, length_penalty and early_stopping, read from `fields` and
// checked with the rest of `sp` (the request's SamplingParams as
// convert_sampling made it, best_of >= n checked there; unset fields
// resolved: from generation_config.json by the parsers, neutral values
// where no model is known):
//  - logprobs (as `logprobs_param`) and prompt_logprobs within max_logprobs;
//  - without beam search: length_penalty and early_stopping at their
//    defaults; greedy sampling (temperature < 1e-5) with n or best_of 1;
//  - with it: temperature 0, top_p 1, top_k off; what the search does not
//    take yet refused naming the field (logprobs as `logprobs_param`,
//    prompt_logprobs, stop, min_tokens, the penalties, logit_bias,
//    bad_words, allowed_token_ids, guided decoding, echo); the beam width
//    (best_of, else n) within max_logprobs, with at least the distinct
//    stop_token_ids as eos ids (the parsers check again with the model's).
// Returns the search's parameters (beam_width, length_penalty,
// early_stopping; no eos ids yet) with use_beam_search, else nullopt.
std::optional<BeamSearchParams> check_sampling_cross_fields(
    const request_model::RequestFields& fields, const SamplingParams& sp, bool echo,
    const char* logprobs_param, int64_t max_logprobs);

}  // namespace pagoda
