#include "server/prompt_tokenizer.h"

#include <algorithm>

namespace pagoda {

namespace {

std::vector<int32_t> add_specials(const Tokenizer& tok, std::vector<int32_t> body,
                                  bool add_special_tokens) {
  if (!add_special_tokens) return body;
  // What encode adds around any text: [], [BOS], [EOS] or [BOS, EOS].
  const std::vector<int32_t> wrap = tok.encode("", /*add_special_tokens=*/true);
  const auto bos = tok.bos_token_id();
  const auto eos = tok.eos_token_id();
  const bool add_bos = !wrap.empty() && bos && wrap.front() == *bos;
  const bool add_eos = !wrap.empty() && eos && wrap.back() == *eos && (wrap.size() > 1 || !add_bos);
  std::vector<int32_t> ids;
  ids.reserve(body.size() + 2);
  if (add_bos) ids.push_back(*bos);
  ids.insert(ids.end(), body.begin(), body.end());
  if (add_eos) ids.push_back(*eos);
  return ids;
}

// Where a tail starts: the first position at or after `from` that follows
// an ASCII space or newline and holds a non-whitespace byte; npos if none.
// (Not any character boundary: inside a run like "aaaa..." two tails of
// the same parity agree with each other and not with the whole text.)
size_t tail_start(std::string_view text, size_t from) {
  for (size_t p = std::max<size_t>(from, 1); p < text.size(); ++p) {
    const char prev = text[p - 1];
    const auto c = static_cast<unsigned char>(text[p]);
    if ((prev == ' ' || prev == '\n') && c > ' ' && c != 0x7f) return p;
  }
  return std::string_view::npos;
}

// The ids that a and b end with alike, minus the first of them (the token
// at which the two tails met may still depend on where they began).
std::optional<std::vector<int32_t>> common_end(const std::vector<int32_t>& a,
                                               const std::vector<int32_t>& b, size_t keep) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  if (n < keep + 1) return std::nullopt;
  return std::vector<int32_t>(b.end() - static_cast<std::ptrdiff_t>(n - 1), b.end());
}

}  // namespace

std::optional<std::vector<int32_t>> encode_prompt_tail(const Tokenizer& tok, std::string_view text,
                                                       bool add_special_tokens, size_t keep) {
  // ~16 bytes a token is generous for real text (English ~4, CJK ~3-6).
  for (size_t window = 16 * (keep + 64); 2 * window < text.size() && window <= kMaxTailBytes;
       window *= 4) {
    const size_t near = tail_start(text, text.size() - window);
    const size_t far = tail_start(text, text.size() - 2 * window);
    if (near == std::string_view::npos || far == std::string_view::npos || far >= near) continue;
    const std::vector<int32_t> a = tok.encode_with_special_text(text.substr(far));
    const std::vector<int32_t> b = tok.encode_with_special_text(text.substr(near));
    if (auto ids = common_end(a, b, keep))
      return add_specials(tok, std::move(*ids), add_special_tokens);
  }
  if (text.size() > kMaxWholeBytes) return std::nullopt;
  return encode_prompt(tok, text, add_special_tokens);
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text,
                                   bool add_special_tokens) {
  return add_specials(tok, tok.encode_with_special_text(text), add_special_tokens);
}

std::vector<int32_t> encode_prompt_bounded(const Tokenizer& tok, std::string_view text,
                                           bool add_special_tokens, size_t max_tokens) {
  return add_specials(tok, tok.encode_with_special_text_bounded(text, max_tokens),
                      add_special_tokens);
}

}  // namespace pagoda
