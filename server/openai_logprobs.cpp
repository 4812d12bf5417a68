#include "server/openai_logprobs.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pagoda {

using json = nlohmann::ordered_json;

namespace {

constexpr size_t kWindow = 5;  // ids of context for incremental decoding

double clamp_logprob(float lp) {
  if (std::isnan(lp)) return -9999.0;
  return std::max(static_cast<double>(lp), -9999.0);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

int64_t utf8_length(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

ChoiceLogprobs::ChoiceLogprobs(const Tokenizer& tok, const std::vector<int32_t>& context_ids,
                               int64_t text_offset)
    : tok_(tok), offset_(text_offset) {
  size_t from = context_ids.size() > kWindow ? context_ids.size() - kWindow : 0;
  window_.assign(context_ids.begin() + static_cast<std::ptrdiff_t>(from), context_ids.end());
}

std::string ChoiceLogprobs::token_text(int32_t id) const {
  if (id < 0 || id >= tok_.vocab_size()) return "";
  std::vector<int32_t> ids = window_;
  std::string before = tok_.decode(ids, /*skip_special_tokens=*/false);
  ids.push_back(id);
  std::string after = tok_.decode(ids, /*skip_special_tokens=*/false);
  if (after.size() >= before.size() && after.compare(0, before.size(), before) == 0)
    return after.substr(before.size());
  std::vector<int32_t> one{id};
  return tok_.decode(one, /*skip_special_tokens=*/false);
}

void ChoiceLogprobs::advance(int32_t id, const std::string& text) {
  window_.push_back(id);
  if (window_.size() > kWindow) window_.erase(window_.begin());
  offset_ += utf8_length(text);
}

json ChoiceLogprobs::completion(const std::vector<TokenLogprob>& lps) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    std::string text = token_text(lp.token_id);
    // Most likely first (lp.top's order), the sampled token last when it is
    // not among them (its logprob is no higher than theirs).
    json alts = json::object();
    for (const auto& [id, v] : lp.top) {
      std::string t = token_text(id);
      if (!alts.contains(t)) alts[t] = clamp_logprob(v);
    }
    if (!alts.contains(text)) alts[text] = clamp_logprob(lp.logprob);
    tokens.push_back(text);
    token_logprobs.push_back(clamp_logprob(lp.logprob));
    top.push_back(std::move(alts));
    offsets.push_back(offset_);
    advance(lp.token_id, text);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json ChoiceLogprobs::chat(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    std::string text = token_text(lp.token_id);
    json alts = json::array();
    for (const auto& [id, v] : lp.top) {
      std::string t = token_text(id);
      alts.push_back({{"token", t}, {"logprob", clamp_logprob(v)}, {"bytes", bytes_of(t)}});
    }
    content.push_back({{"token", text},
                       {"logprob", clamp_logprob(lp.logprob)},
                       {"bytes", bytes_of(text)},
                       {"top_logprobs", std::move(alts)}});
    advance(lp.token_id, text);
  }
  return {{"content", std::move(content)}};
}

}  // namespace pagoda
