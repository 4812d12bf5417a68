#include "server/prompt_tokenizer.h"

#include <filesystem>
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace pagoda {

namespace {

// Earliest special string at or after pos (longest on ties); npos if none.
size_t find_special(std::string_view text, size_t pos, const std::vector<SpecialTokenText>& specials,
                    const SpecialTokenText** which) {
  size_t best = std::string_view::npos;
  for (const SpecialTokenText& s : specials) {
    if (s.text.empty()) continue;
    size_t at = text.find(s.text, pos);
    if (at == std::string_view::npos) continue;
    if (at < best || (at == best && s.text.size() > (*which)->text.size())) {
      best = at;
      *which = &s;
    }
  }
  return best;
}

}  // namespace

PromptTokenizerOptions prompt_tokenizer_options(const std::string& dir, const TokenizerConfig& tc,
                                                const Tokenizer& tok) {
  PromptTokenizerOptions o;
  if (!tc.bos_token.empty() && tok.bos_token_id()) o.specials.push_back({tc.bos_token, *tok.bos_token_id()});
  if (!tc.eos_token.empty() && tok.eos_token_id()) o.specials.push_back({tc.eos_token, *tok.eos_token_id()});
  std::ifstream in(std::filesystem::path(dir) / "tokenizer_config.json");
  if (!in) return o;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return o;
  if (j.contains("legacy") && j["legacy"].is_boolean()) o.legacy = j["legacy"].get<bool>();
  return o;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special_tokens,
                                   const PromptTokenizerOptions& opts) {
  const SpecialTokenText* which = nullptr;
  if (find_special(text, 0, opts.specials, &which) == std::string_view::npos)
    return tok.encode(text, add_special_tokens);

  std::vector<int32_t> ids;
  std::vector<int32_t> wrap = tok.encode("", add_special_tokens);  // [BOS] / [BOS, EOS] / []
  auto bos = tok.bos_token_id();
  auto eos = tok.eos_token_id();
  bool add_bos = !wrap.empty() && bos && wrap.front() == *bos;
  bool add_eos = !wrap.empty() && eos && wrap.back() == *eos && (wrap.size() > 1 || !add_bos);
  if (add_bos) ids.push_back(*bos);

  // The marker's pieces, if it stays a separate prefix (a normalizer could
  // drop it, a vocabulary could know it: then segments are encoded plainly).
  const std::vector<int32_t> marker_ids = tok.encode(opts.marker, false);
  bool marker_ok = !marker_ids.empty() && !opts.marker.empty();
  if (marker_ok) {
    std::vector<int32_t> probe = tok.encode(opts.marker + "a", false);
    marker_ok = probe.size() > marker_ids.size() && std::equal(marker_ids.begin(), marker_ids.end(), probe.begin());
  }
  size_t pos = 0;
  bool after_special = false;
  while (pos <= text.size()) {
    which = nullptr;
    size_t at = find_special(text, pos, opts.specials, &which);
    std::string_view seg = text.substr(pos, (at == std::string_view::npos ? text.size() : at) - pos);
    if (!seg.empty()) {
      if (!after_special || opts.legacy || !marker_ok) {
        std::vector<int32_t> s = tok.encode(seg, false);
        ids.insert(ids.end(), s.begin(), s.end());
      } else {
        std::string marked = opts.marker;
        marked.append(seg);
        std::vector<int32_t> s = tok.encode(marked, false);
        if (s.size() > marker_ids.size())
          ids.insert(ids.end(), s.begin() + static_cast<std::ptrdiff_t>(marker_ids.size()), s.end());
      }
    }
    if (at == std::string_view::npos) break;
    ids.push_back(which->id);
    after_special = true;
    pos = at + which->text.size();
  }
  if (add_eos) ids.push_back(*eos);
  return ids;
}

}  // namespace pagoda
