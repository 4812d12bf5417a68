#include "server/prompt_tokenizer.h"

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

}  // namespace

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
