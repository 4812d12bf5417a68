#include "engine/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace pagoda {
namespace {

// The id of a special token named by the config (text), if the vocabulary has
// it as a piece; else the model's own id (if any).
std::optional<int32_t> resolve_special(const sentencepiece::SentencePieceProcessor& sp,
                                       const std::string& text, int model_id) {
  if (!text.empty()) {
    const int id = sp.PieceToId(text);
    if (id >= 0 && id < sp.GetPieceSize() && sp.IdToPiece(id) == text) return id;
  }
  if (model_id >= 0 && model_id < sp.GetPieceSize()) return model_id;
  return std::nullopt;
}

// Protocol-buffer wire format (https://protobuf.dev/programming-guides/
// encoding/), just enough to read ModelProto.normalizer_spec (field 3) and,
// in it, precompiled_charsmap (2) and remove_extra_whitespaces (4, default
// true), as sentencepiece_model.proto declares them; the library does not
// install that header.
bool read_varint(std::string_view& s, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !s.empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(s.front());
    s.remove_prefix(1);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls f(field, wire_type, varint, bytes) for each field of message s;
// false when s is malformed.
template <typename F>
bool for_each_field(std::string_view s, F f) {
  while (!s.empty()) {
    uint64_t key = 0, v = 0;
    if (!read_varint(s, key)) return false;
    std::string_view bytes;
    switch (key & 7) {
      case 0:
        if (!read_varint(s, v)) return false;
        break;
      case 1:
      case 5: {
        const size_t n = (key & 7) == 1 ? 8 : 4;
        if (s.size() < n) return false;
        s.remove_prefix(n);
        break;
      }
      case 2:
        if (!read_varint(s, v) || v > s.size()) return false;
        bytes = s.substr(0, v);
        s.remove_prefix(v);
        break;
      default:
        return false;
    }
    f(key >> 3, key & 7, v, bytes);
  }
  return true;
}

// What min_token_count may rely on from the model's normalizer_spec.
struct NormalizerFacts {
  bool identity = false;        // no precompiled_charsmap: bytes kept as they are
  bool remove_extra_ws = true;  // runs of spaces collapse, ends are trimmed
};

std::optional<NormalizerFacts> normalizer_facts(const std::string& model_proto) {
  std::string_view spec;
  bool found = false;
  if (!for_each_field(model_proto,
                      [&](uint64_t field, uint64_t type, uint64_t, std::string_view b) {
                        if (field == 3 && type == 2) {
                          spec = b;
                          found = true;
                        }
                      }))
    return std::nullopt;
  if (!found) return std::nullopt;
  NormalizerFacts f;
  bool charsmap = false;
  if (!for_each_field(spec, [&](uint64_t field, uint64_t type, uint64_t v, std::string_view b) {
        if (field == 2 && type == 2) charsmap = !b.empty();
        if (field == 4 && type == 0) f.remove_extra_ws = v != 0;
      }))
    return std::nullopt;
  f.identity = !charsmap;
  return f;
}

// What remove_extra_whitespaces collapses under an identity normalizer:
// sentencepiece's Normalizer compares each normalized prefix with " ", so
// only the space itself ("\n", "\t" are kept, each its own byte token: a
// text of 16 M newlines counted as none once let such a prompt through the
// bound, 28 s and 3.7 GB; found by a fresh-user attack).
bool is_collapsed_space(char c) { return c == ' '; }

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file,
                                               const TokenizerConfig& config)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), config_(config) {
  const auto status = sp_->Load(model_file);
  if (!status.ok()) {
    throw std::runtime_error("cannot load SentencePiece model " + model_file + ": " +
                             status.ToString());
  }
  bos_ = resolve_special(*sp_, config_.bos_token, sp_->bos_id());
  eos_ = resolve_special(*sp_, config_.eos_token, sp_->eos_id());
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if ((sp_->IsControl(id) || sp_->IsUnknown(id)) && !sp_->IdToPiece(id).empty()) {
      special_pieces_.emplace_back(sp_->IdToPiece(id), id);
    }
  }
  std::stable_sort(special_pieces_.begin(), special_pieces_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  size_t longest = 1;
  int byte_pieces = 0;
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if (sp_->IsByte(id)) {
      ++byte_pieces;
    } else if (!sp_->IsUnused(id)) {
      longest = std::max(longest, sp_->IdToPiece(id).size());
    }
  }
  const auto facts = normalizer_facts(sp_->serialized_model_proto());
  if (byte_pieces == 256 && facts && facts->identity) {
    max_bytes_per_token_ = longest;
    skip_spaces_in_bound_ = facts->remove_extra_ws;
  }
}

size_t SentencePieceTokenizer::min_token_count(std::string_view text) const {
  if (max_bytes_per_token_ == 0) return 0;
  size_t kept = text.size();
  if (skip_spaces_in_bound_)
    kept -= static_cast<size_t>(std::count_if(text.begin(), text.end(), is_collapsed_space));
  return (kept + max_bytes_per_token_ - 1) / max_bytes_per_token_;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int> SentencePieceTokenizer::sp_encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) throw std::runtime_error("SentencePiece encode failed: " + status.ToString());
  return ids;
}

std::vector<int> SentencePieceTokenizer::encode_no_prefix(std::string_view text) const {
  // A sentinel before the text takes the dummy prefix; its own tokens are then
  // dropped (HF LlamaTokenizer legacy=false does this with "<unk>", which can
  // merge with the text: Chinese-LLaMA-2 has the piece ">[", so "<unk>[INST]"
  // gives "▁<" "unk" ">[" ...). A private-use character
  // (U+E000) is in no piece of these vocabularies, so no BPE merge crosses it
  // (and a merge would fail the check below): it becomes byte
  // pieces (or <unk>) and the text's pieces are those of the text alone.
  // Checked: the sentinel's own encoding must lead the result.
  for (const std::string& sentinel : {std::string("\xEE\x80\x80"), sp_->IdToPiece(sp_->unk_id())}) {
    const std::vector<int> head = sp_encode(sentinel);
    std::vector<int> ids = sp_encode(sentinel + std::string(text));
    if (ids.size() >= head.size() && std::equal(head.begin(), head.end(), ids.begin())) {
      ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(head.size()));
      return ids;
    }
  }
  throw std::runtime_error("cannot encode text without the SentencePiece dummy prefix: the "
                           "sentinel merges with it");
}

std::vector<int32_t> SentencePieceTokenizer::encode_with_special_text(std::string_view text) const {
  std::vector<int32_t> out;
  size_t pos = 0;
  auto add_segment = [&](size_t end) {
    if (end == pos) return;
    const std::string_view seg = text.substr(pos, end - pos);
    const std::vector<int> ids = pos == 0 || config_.legacy ? sp_encode(seg) : encode_no_prefix(seg);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    const std::pair<std::string, int32_t>* match = nullptr;
    for (const auto& sp : special_pieces_) {  // longest first: ties keep the longer
      const size_t at = text.find(sp.first, pos);
      if (at < best) {
        best = at;
        match = &sp;
      }
    }
    if (match == nullptr) break;
    add_segment(best);
    out.push_back(match->second);
    pos = best + match->first.size();
  }
  add_segment(text.size());
  return out;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text,
                                                    bool add_special_tokens) const {
  const std::vector<int> ids = sp_encode(text);
  std::vector<int32_t> out;
  out.reserve(ids.size() + 2);
  if (add_special_tokens && config_.add_bos_token && bos_) out.push_back(*bos_);
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_special_tokens && config_.add_eos_token && eos_) out.push_back(*eos_);
  return out;
}

bool SentencePieceTokenizer::has_piece(int32_t id) const {
  if (id < 0) throw std::out_of_range("token id " + std::to_string(id) + " is negative");
  return id < sp_->GetPieceSize();
}

std::string SentencePieceTokenizer::decode_run(const std::vector<int>& run) const {
  std::string text;
  const auto status = sp_->Decode(run, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece decode failed: " + status.ToString());
  return text;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids,
                                           bool skip_special_tokens) const {
  if (skip_special_tokens) {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (int32_t id : ids) {
      if (has_piece(id) && !is_special(id)) kept.push_back(id);
    }
    return decode_run(kept);
  }
  std::string out;
  std::vector<int> run;
  auto flush_run = [&] {
    if (run.empty()) return;
    // DecodeIds drops the first piece's leading "▁" (the dummy prefix); keep
    // it as a space when the run follows earlier output.
    const std::string first = sp_->IdToPiece(run.front());
    if (!out.empty() && first.rfind("\xE2\x96\x81", 0) == 0) out += ' ';
    out += decode_run(run);
    run.clear();
  };
  for (int32_t id : ids) {
    if (!has_piece(id)) continue;  // as HF tokenizers: an id without a piece gives no text
    if (is_special(id)) {
      flush_run();
      out += sp_->IdToPiece(id);
    } else {
      run.push_back(id);
    }
  }
  flush_run();
  return out;
}

std::string SentencePieceTokenizer::id_to_piece(int32_t id) const {
  return has_piece(id) ? sp_->IdToPiece(id) : std::string();
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  return has_piece(id) && (sp_->IsControl(id) || sp_->IsUnknown(id));
}

int64_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace pagoda
