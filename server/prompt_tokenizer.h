// Tokenizing prompt text as Hugging Face tokenizers do when the text holds
// special-token strings (a chat template writes "<s>", "<|im_start|>"...):
// the tokenizer itself splits them out (Tokenizer::encode_with_special_text:
// SentencePiece's control pieces, byte-level BPE's added tokens, each with
// its own rules for the text between them); this only adds BOS/EOS around
// the result when add_special_tokens asks for them.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// Token ids of prompt text: tok.encode_with_special_text(text), with the
// BOS/EOS that tok.encode(·, true) adds (as encode("", true) shows: BOS
// first when the tokenizer config's add_bos_token, EOS last when
// add_eos_token) when add_special_tokens. Chat prompts use
// add_special_tokens=false (vLLM; a template that writes "<s>" gets one
// BOS); completion prompts default to true (HF's encode). Text without
// special-token strings gives exactly tok.encode(text, add_special_tokens).
// Throws what the tokenizer throws (std::invalid_argument for invalid UTF-8
// from byte-level BPE).
std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special_tokens);
// The same, through Tokenizer::encode_with_special_text_bounded: more than
// max_tokens ids (BOS/EOS included) means the text is longer than that (the
// ids are then a prefix, their number a lower bound); otherwise exactly
// encode_prompt(tok, text, add_special_tokens).
std::vector<int32_t> encode_prompt_bounded(const Tokenizer& tok, std::string_view text,
                                           bool add_special_tokens, size_t max_tokens);

}  // namespace pagoda
