// Incremental detokenization after vLLM's detokenize_incrementally
// (vllm/transformers_utils/detokenizer_utils.py): decode a small window of
// already-emitted context tokens [prefix_offset, read_offset) and the window
// extended by the new tokens; the new text is the difference.
#include "engine/tokenizer/detokenizer.h"

#include <algorithm>
#include <span>
#include <string_view>

namespace pagoda {
namespace {

// Tokens of prompt context the first generated tokens are decoded against
// (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET).
constexpr size_t kInitialContext = 5;
// A UTF-8 character has at most 4 bytes, each pending token adds at least
// one: with this many tokens pending, a trailing U+FFFD is a real invalid
// byte, not an unfinished character, and is emitted.
constexpr size_t kMaxPending = 4;
// Tokens a window may hold open over a trailing U+FFFD before it closes.
constexpr size_t kMaxWindow = 64;
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// s without its trailing U+FFFDs, at most 3: a UTF-8 character unfinished
// at the end of the bytes has at most 3 bytes, which decode to one U+FFFD
// (byte-level BPE: the maximal subpart, as Python's errors="replace") or one
// per byte (SentencePiece byte fallback). Everything before them is final:
// both decoders work left to right.
std::string strip_unfinished_tail(const std::string& s) {
  size_t n = s.size();
  for (int k = 0; k < 3 && n >= kReplacement.size() &&
                  s.compare(n - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
       ++k)
    n -= kReplacement.size();
  return s.substr(0, n);
}

// Length of the longest common prefix of a and b that ends on a UTF-8
// character boundary of b.
size_t common_prefix_on_boundary(const std::string& a, const std::string& b) {
  size_t n = 0;
  const size_t m = std::min(a.size(), b.size());
  while (n < m && a[n] == b[n]) ++n;
  while (n > 0 && n < b.size() && (static_cast<unsigned char>(b[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

Detokenizer::Detokenizer(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                         bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {
  // Only the prompt's tail is ever decoded again; special tokens that decode
  // skips anyway are left out so that they do not take the context's place.
  for (size_t i = prompt_ids.size(); i > 0 && ids_.size() < kInitialContext; --i) {
    const int32_t id = prompt_ids[i - 1];
    if (!(skip_special_ && tok_.is_special(id))) ids_.push_back(id);
  }
  std::reverse(ids_.begin(), ids_.end());
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string Detokenizer::emit(bool final) {
  if (read_offset_ == ids_.size()) return "";
  const std::span<const int32_t> all(ids_);
  // What the window's text already gave: its context, plus (window held
  // open) the stable part emitted since.
  const std::string sent =
      held_open_
          ? sent_text_
          : tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string new_text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  const size_t pending = ids_.size() - read_offset_;
  std::string stable = new_text;  // the part no later token can change
  if (!final && ends_with_replacement(new_text)) {
    // Possibly an unfinished UTF-8 character from byte pieces: wait for it
    // (as vLLM) while fewer than kMaxPending tokens are pending; then emit
    // all but the trailing U+FFFDs, which later bytes may still turn into a
    // character. Past kMaxWindow tokens the window closes regardless, so
    // endless invalid bytes cost O(kMaxWindow) per step.
    if (pending < kMaxPending) return "";
    if (pending < kMaxWindow) stable = strip_unfinished_tail(new_text);
  }
  if (stable.size() <= sent.size() && sent.compare(0, stable.size(), stable) == 0) {
    return "";  // nothing visible yet
  }
  std::string delta;
  if (stable.compare(0, sent.size(), sent) == 0) {
    delta = stable.substr(sent.size());
  } else {
    // Only for text decoded apart from its context that later bytes changed
    // (the window closed at kMaxWindow, or a SentencePiece space): emit from
    // the first difference on a character boundary.
    delta = stable.substr(common_prefix_on_boundary(sent, stable));
  }
  if (stable.size() < new_text.size()) {
    held_open_ = true;  // the window's U+FFFD tail is still open
    sent_text_ = std::move(stable);
    return delta;
  }
  held_open_ = false;
  sent_text_.clear();
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  // Keep the stored ids bounded: everything before prefix_offset_ is done.
  if (prefix_offset_ > 1024) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  return delta;
}

std::string Detokenizer::step(int32_t token_id) {
  if (skip_special_ && tok_.is_special(token_id)) return "";  // decode drops it
  ids_.push_back(token_id);
  return emit(/*final=*/false);
}

std::string Detokenizer::flush() { return emit(/*final=*/true); }

}  // namespace pagoda
