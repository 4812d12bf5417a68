// Incremental detokenization after vLLM's detokenize_incrementally
// (vllm/transformers_utils/detokenizer_utils.py): decode a small window of
// already-emitted context tokens [prefix_offset, read_offset) and the window
// extended by the new tokens; the new text is the difference.
#include "engine/tokenizer/detokenizer.h"

#include <algorithm>
#include <span>

namespace pagoda {
namespace {

// Tokens of prompt context the first generated tokens are decoded against
// (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET).
constexpr size_t kInitialContext = 5;
// A UTF-8 character has at most 4 bytes, each pending token adds at least
// one: with this many tokens pending, a trailing U+FFFD is a real invalid
// byte, not an unfinished character, and is emitted.
constexpr size_t kMaxPending = 4;

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
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
  const std::string prefix_text =
      tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string new_text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  const size_t pending = ids_.size() - read_offset_;
  if (!final) {
    if (new_text.size() <= prefix_text.size() && new_text == prefix_text.substr(0, new_text.size())) {
      return "";  // nothing visible yet
    }
    if (ends_with_replacement(new_text) && pending < kMaxPending) {
      return "";  // possibly an unfinished UTF-8 character from byte pieces
    }
  }
  std::string delta;
  if (new_text.compare(0, prefix_text.size(), prefix_text) == 0) {
    delta = new_text.substr(prefix_text.size());
  } else {
    // Only when emitted text ended in an invalid byte that later bytes turned
    // into a character: emit from the first difference on a char boundary.
    delta = new_text.substr(common_prefix_on_boundary(prefix_text, new_text));
  }
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
