// Tokenizing prompt text as Hugging Face tokenizers do when the text holds
// special-token strings (a chat template writes "<s>", "<|im_start|>"...):
// the tokenizer itself splits them out (Tokenizer::encode_with_special_text:
// SentencePiece's control pieces, byte-level BPE's added tokens, each with
// its own rules for the text between them); this only adds BOS/EOS around
// the result when add_special_tokens asks for them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
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
// For left truncation to `keep` ids (truncate_prompt_tokens): the BOS/EOS
// encode_prompt adds around at least the last `keep` ids of
// tok.encode_with_special_text(text) (all of them for a short text), found
// by tokenizing only the text's tail, so a 30 MB prompt costs what its
// last few kilobytes do. How: the tail starts just after an ASCII space or
// newline that precedes a non-space; the tokenizers here (byte-level BPE,
// whose pre-tokenizer pieces end at such a point; SentencePiece, whose
// pieces hold "▁" only at their start) tokenize what follows such a point
// as the whole text does from one or two tokens on. That is checked, not
// assumed: two tails of different lengths must end in the same ids, at
// least keep + 1 of them, of which the first is dropped; else the tails
// grow (x4) up to kMaxTailBytes. A text of at most kMaxWholeBytes is
// tokenized whole when no tail settles it (256 KiB: ~0.3 s for
// SentencePiece). std::nullopt when neither works (a larger text with no
// such point near its end, e.g. one long word or CJK text without
// newlines): the caller refuses it. Throws what the tokenizer throws.
inline constexpr size_t kMaxTailBytes = size_t{1} << 20;
inline constexpr size_t kMaxWholeBytes = size_t{256} << 10;
std::optional<std::vector<int32_t>> encode_prompt_tail(const Tokenizer& tok, std::string_view text,
                                                       bool add_special_tokens, size_t keep);

}  // namespace pagoda
