// Prompt logprobs on the wire, as vLLM's serving_completion.py /
// serving_chat.py write them:
//  - prompt_logprobs_json: vLLM's `prompt_logprobs` list (completions: in
//    each choice; chat: top level of the response), one entry per prompt
//    token: null for the first, then {"<token id>": {"logprob", "rank",
//    "decoded_token"}} holding the k most likely (ranks 1..k, in rank order)
//    and the prompt token (its rank; last when it is not among the k; one
//    that is keeps its top-k rank, as vLLM's dict update). decoded_token: the id decoded alone
//    (special tokens kept), with the leading spaces of its SentencePiece
//    piece restored (vLLM's convert_ids_list_to_tokens). Logprobs clamped at
//    -9999.0.
//  - echo_logprobs_json: completions' echo with logprobs: the echoed prompt
//    tokens' part of the logprobs object ({tokens, token_logprobs,
//    top_logprobs, text_offset}), first token's logprob and top_logprobs
//    null, text_offset from 0; the completion's entries follow it
//    (append_logprobs_json), their offsets continuing from offset_after.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// A token's decoded_token as vLLM writes it: the id decoded alone (special
// tokens kept), with the leading spaces of its SentencePiece piece restored
// (vLLM's convert_ids_list_to_tokens): " upon", not "upon".
std::string decoded_token(const Tokenizer& tok, int32_t id);

// ordered_json, as openai_logprobs.h's: the entries keep their rank order.
nlohmann::ordered_json prompt_logprobs_json(const Tokenizer& tok,
                                            const std::vector<PromptLogprob>& lps);

// prompt_ids: the prompt (size lps.size() + 1). offset_after (out): the
// characters of the echoed tokens' text, where the completion's offsets go on.
nlohmann::ordered_json echo_logprobs_json(const Tokenizer& tok,
                                          const std::vector<int32_t>& prompt_ids,
                                          const std::vector<PromptLogprob>& lps,
                                          int64_t* offset_after);

// Appends b's four lists to a's (completions logprobs objects).
void append_logprobs_json(nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

// The request-level prompt logprobs a choice's prompt got: carried by one
// choice's output among those of prompt index / n (the first delta of that
// engine request); null when none carries them.
const std::vector<PromptLogprob>* find_prompt_logprobs(const std::vector<RequestOutput>& choices,
                                                       int index, int n);

}  // namespace pagoda
