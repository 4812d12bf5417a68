#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/bpe_normalizer.h"
#include "engine/tokenizer/bpe_regex.h"

namespace pagoda {
namespace {

constexpr uint8_t kUnused = 0, kVocab = 1, kAdded = 2, kSpecial = 3;

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeSpec spec, const TokenizerConfig& config)
    : nfc_(spec.nfc), config_(config), added_(std::move(spec.added_tokens)) {
  if (nfc_ && !bpe::nfc_available()) bpe::nfc("");  // throws the "built without" error
  splitter_ = std::make_unique<bpe::RegexSplitter>(spec.pattern);

  int32_t max_id = -1;
  for (const auto& [tok, id] : spec.vocab) {
    if (id < 0) throw std::runtime_error("BPE vocab token \"" + tok + "\" has a negative id");
    max_id = std::max(max_id, id);
  }
  for (const auto& a : added_) {
    if (a.id < 0) throw std::runtime_error("added token \"" + a.content + "\" has a negative id");
    if (a.content.empty()) throw std::runtime_error("added token " + std::to_string(a.id) + " is empty");
    if (a.single_word) {
      throw std::runtime_error("added token \"" + a.content +
                               "\" has single_word=true, which is not supported");
    }
    max_id = std::max(max_id, a.id);
  }
  const auto n = static_cast<size_t>(max_id + 1);
  pieces_.assign(n, "");
  bytes_.assign(n, "");
  kind_.assign(n, kUnused);
  for (const auto& [tok, id] : spec.vocab) {
    pieces_[static_cast<size_t>(id)] = tok;
    bytes_[static_cast<size_t>(id)] = bpe::token_to_bytes(tok);
    kind_[static_cast<size_t>(id)] = kVocab;
  }
  for (const auto& a : added_) {
    const auto i = static_cast<size_t>(a.id);
    pieces_[i] = a.content;
    bytes_[i] = bpe::token_to_bytes(a.content);
    kind_[i] = a.special ? kSpecial : kAdded;
  }
  model_ = std::make_unique<bpe::BpeModel>(std::move(spec.vocab), spec.merges, spec.ignore_merges);

  std::stable_sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < added_.size(); ++i) {
    added_by_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(i);
  }

  auto resolve = [&](const std::string& text) -> std::optional<int32_t> {
    if (text.empty()) return std::nullopt;
    for (const auto& a : added_) {
      if (a.content == text) return a.id;
    }
    const auto& v = model_->vocab();
    if (auto it = v.find(text); it != v.end()) return it->second;
    return std::nullopt;
  };
  bos_ = resolve(config_.bos_token);
  eos_ = resolve(config_.eos_token);

  size_t longest = 1;
  for (size_t i = 0; i < kind_.size(); ++i)
    if (kind_[i] == kVocab) longest = std::max(longest, bytes_[i].size());
  bool bounded = true;
  for (const auto& a : added_) {
    longest = std::max(longest, a.content.size());
    if (a.lstrip || a.rstrip) bounded = false;
  }
  max_bytes_per_token_ = bounded ? longest * (nfc_ ? 3 : 1) : 0;
}

size_t BpeTokenizer::min_token_count(std::string_view text) const {
  if (max_bytes_per_token_ == 0) return 0;
  return (text.size() + max_bytes_per_token_ - 1) / max_bytes_per_token_;
}

BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer::Match BpeTokenizer::find_added(std::string_view text, size_t pos) const {
  for (size_t i = pos; i < text.size(); ++i) {
    for (size_t k : added_by_byte_[static_cast<unsigned char>(text[i])]) {
      const BpeAddedToken& a = added_[k];
      if (text.compare(i, a.content.size(), a.content) != 0) continue;
      size_t start = i, end = i + a.content.size();
      if (a.lstrip) {
        while (start > pos && is_ascii_space(text[start - 1])) --start;
      }
      if (a.rstrip) {
        while (end < text.size() && is_ascii_space(text[end])) ++end;
      }
      return {start, end, k};
    }
  }
  return {std::string_view::npos, 0, 0};
}

void BpeTokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& out,
                                  size_t max_tokens) const {
  if (segment.empty() || out.size() > max_tokens) return;
  std::string normalized;
  if (nfc_) {
    normalized = bpe::nfc(segment);
    segment = normalized;
  }
  splitter_->for_each(segment, [&](std::string_view word) {
    model_->encode_word(word, out);
    return out.size() <= max_tokens;
  });
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (!bpe::is_valid_utf8(text)) throw std::invalid_argument("text to encode is not valid UTF-8");
  std::vector<int32_t> out;
  if (add_special_tokens && config_.add_bos_token && bos_) out.push_back(*bos_);
  size_t pos = 0;
  while (pos < text.size()) {
    const Match m = find_added(text, pos);
    if (m.start == std::string_view::npos) break;
    encode_segment(text.substr(pos, m.start - pos), out);
    out.push_back(added_[m.token].id);
    pos = m.end;
  }
  if (pos < text.size()) encode_segment(text.substr(pos), out);
  if (add_special_tokens && config_.add_eos_token && eos_) out.push_back(*eos_);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode_with_special_text(std::string_view text) const {
  return encode(text, /*add_special_tokens=*/false);
}

std::vector<int32_t> BpeTokenizer::encode_with_special_text_bounded(std::string_view text,
                                                                    size_t max_tokens) const {
  if (!bpe::is_valid_utf8(text)) throw std::invalid_argument("text to encode is not valid UTF-8");
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos < text.size() && out.size() <= max_tokens) {
    const Match m = find_added(text, pos);
    const size_t end = m.start == std::string_view::npos ? text.size() : m.start;
    encode_segment(text.substr(pos, end - pos), out, max_tokens);
    if (m.start == std::string_view::npos || out.size() > max_tokens) break;
    out.push_back(added_[m.token].id);
    pos = m.end;
  }
  return out;
}

bool BpeTokenizer::has_token(int32_t id) const {
  if (id < 0) throw std::out_of_range("token id " + std::to_string(id) + " is negative");
  return static_cast<size_t>(id) < kind_.size() && kind_[static_cast<size_t>(id)] != kUnused;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!has_token(id)) continue;  // HF tokenizers' decode skips ids it has no token for
    const auto i = static_cast<size_t>(id);
    if (skip_special_tokens && kind_[i] == kSpecial) continue;
    bytes += bytes_[i];
  }
  return bpe::utf8_lossy(bytes);
}

std::string BpeTokenizer::id_to_piece(int32_t id) const {
  return has_token(id) ? pieces_[static_cast<size_t>(id)] : std::string();
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < kind_.size() &&
         kind_[static_cast<size_t>(id)] == kSpecial;
}

}  // namespace pagoda
