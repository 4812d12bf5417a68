// Token ids of vLLM's bad_words, by its rule (vllm/sampling_params.py,
// SamplingParams.update_from_tokenizer): each word, left-stripped of
// whitespace, is encoded without special tokens (special-token text becomes
// its id, as HF's encode does) once as is and once with a leading space;
// the spaced encoding is kept too when its first id differs from the plain
// one's and it has the same length (the space made a new word token, e.g.
// "▁hello" against "hello", rather than a separate space token).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// One token-id list per kept encoding, in the words' order (plain before
// spaced). A word that encodes to no tokens (empty or all whitespace):
// std::invalid_argument naming it (vLLM fails on it with an IndexError).
std::vector<std::vector<int32_t>> bad_words_token_ids(const Tokenizer& tok,
                                                      const std::vector<std::string>& words);

}  // namespace pagoda
