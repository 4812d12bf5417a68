#include "engine/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

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
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text,
                                                    bool add_special_tokens) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) throw std::runtime_error("SentencePiece encode failed: " + status.ToString());
  std::vector<int32_t> out;
  out.reserve(ids.size() + 2);
  if (add_special_tokens && config_.add_bos_token && bos_) out.push_back(*bos_);
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_special_tokens && config_.add_eos_token && eos_) out.push_back(*eos_);
  return out;
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) {
    throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                            std::to_string(sp_->GetPieceSize()) + ")");
  }
}

std::string SentencePieceTokenizer::decode_run(const std::vector<int>& run) const {
  std::string text;
  const auto status = sp_->Decode(run, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece decode failed: " + status.ToString());
  return text;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids,
                                           bool skip_special_tokens) const {
  for (int32_t id : ids) check_id(id);
  if (skip_special_tokens) {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (int32_t id : ids) {
      if (!is_special(id)) kept.push_back(id);
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
  check_id(id);
  return sp_->IdToPiece(id);
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  check_id(id);
  return sp_->IsControl(id) || sp_->IsUnknown(id);
}

int64_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace pagoda
