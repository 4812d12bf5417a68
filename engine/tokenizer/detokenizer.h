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
// Invalid model output (byte pieces that are not UTF-8) keeps the
// invariant: while the text ends in U+FFFD the window waits up to 4 tokens
// (vLLM's hold for an unfinished character), then emits everything but the
// trailing U+FFFDs (at most 3: an unfinished character's bytes), which later
// bytes may still complete; those follow once the text no longer ends in
// U+FFFD or at flush(). Only a window held open past 64 tokens closes with
// its tail emitted, should a later byte still change it.
// Cost per step: two decodes of the window [prefix_offset, end), which is a
// handful of tokens (the window is reset on every emission; invalid bytes
// may hold it open for up to 64).
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
  // The window is held open over a U+FFFD tail: sent_text_ is the window's
  // text emitted so far (its context included).
  bool held_open_ = false;
  std::string sent_text_;
};

}  // namespace pagoda
