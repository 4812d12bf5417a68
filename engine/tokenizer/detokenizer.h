// Incremental detokenizer (vLLM's detokenize_incrementally with
// prefix_offset/read_offset, after HF text-generation-inference): turns one
// sequence's growing token list into text deltas that are always whole UTF-8
// characters and keep SentencePiece's leading spaces right when tokens are
// decoded one at a time.
//
// Invariant: the concatenation of all step() results and flush() equals
// tok.decode(tail + generated)[len(tok.decode(tail)):] (tail: the prompt's
// last ids), i.e. tok.decode(generated, skip_special_tokens) except that the
// first generated token keeps its SentencePiece leading space ("▁there" after
// a prompt gives " there"; with an empty prompt the two are equal).
// One further exception, for invalid model output only: once 4 tokens in a
// row leave the text ending in U+FFFD (no UTF-8 character needs more), that
// text is emitted; should a later byte piece still complete a character
// begun there, the delta restarts at the first changed character.
// Cost per step: two decodes of the window [prefix_offset, end), which is a
// handful of tokens (the window is reset on every emission).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

class Detokenizer {
 public:
  // prompt_ids give the context the first generated tokens are decoded
  // against (so a leading "▁" after the prompt becomes a space; only the last
  // 5 are kept, as vLLM). tok must outlive the Detokenizer. With
  // skip_special_tokens, special ids (tok.is_special) produce no text and do
  // not enter the window. Ids outside the vocabulary: std::out_of_range.
  Detokenizer(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
              bool skip_special_tokens);
  // Appends one generated token; returns the new text (possibly "" while a
  // multi-byte character is incomplete).
  std::string step(int32_t token_id);
  // Text held back (an incomplete UTF-8 tail) flushed at the end of the
  // sequence, as U+FFFD replacement like HF's decode would give.
  std::string flush();

 private:
  // Decodes the window and emits the new text (final: emit even a trailing
  // U+FFFD), advancing the offsets when it emits.
  std::string emit(bool final);

  const Tokenizer& tok_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  bool skip_special_;
};

}  // namespace pagoda
