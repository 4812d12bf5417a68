// Bad words (vLLM's SamplingParams.bad_words, vllm/v1/sample/ops/bad_words.py):
// the ids banned at the next step. A bad word of token ids w[0..m) bans
// w[m-1] when the output so far ends with w[0..m-1) (a one-token word is
// banned at every step); the prompt does not count, as in vLLM v1.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sample/sampling_params.h"

namespace pagoda {

// Appends to `bans` the id each matching word of sp.bad_words_token_ids bans
// after `output_ids` (duplicates possible; empty words are skipped).
void append_bad_word_bans(const SamplingParams& sp, std::span<const int32_t> output_ids,
                          std::vector<int32_t>& bans);

// Every id banned (-inf) at a sequence's next step: while the output is
// shorter than min_tokens, EOS (unless ignore_eos) and stop_token_ids
// (vLLM's MinTokensLogitsProcessor), then the bad words' bans.
void append_sampling_bans(const SamplingParams& sp, std::span<const int32_t> output_ids,
                          const std::vector<int32_t>& eos_token_ids, std::vector<int32_t>& bans);

}  // namespace pagoda
