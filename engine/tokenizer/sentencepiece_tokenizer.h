// SentencePiece tokenizer (tokenizer.model), with HF LlamaTokenizer's
// special-token semantics on top of the sentencepiece library
// (https://github.com/google/sentencepiece, 0.1.97).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pagoda {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads model_file (a serialized SentencePiece ModelProto). BOS/EOS ids come
  // from config.bos_token/eos_token when they name a piece of the vocabulary,
  // else from the model's own bos_id/eos_id (none when negative).
  // Throws std::runtime_error naming model_file when it cannot be loaded.
  SentencePieceTokenizer(const std::string& model_file, const TokenizerConfig& config);
  ~SentencePieceTokenizer() override;

  // sentencepiece Encode(text) (which adds the "▁" dummy prefix as the model's
  // normalizer says); with add_special_tokens, BOS first when
  // config.add_bos_token and EOS last when config.add_eos_token (HF
  // LlamaTokenizer.build_inputs_with_special_tokens).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  // Special pieces' text (longest match first) becomes their ids; with
  // config.legacy every segment is sp Encode'd (dummy prefix and all), else
  // segments not at the start are encoded without the dummy prefix after
  // HF's LlamaTokenizer (legacy=false): encode(sentinel + segment) and drop the
  // sentinel's own tokens (sentinel U+E000, which no piece contains; checked,
  // else std::runtime_error).
  std::vector<int32_t> encode_with_special_text(std::string_view text) const override;
  // ceil(B / M), M the longest piece in bytes (a byte piece covers one
  // byte; a control piece, matched as text by encode_with_special_text, its
  // text), B the input bytes the normalizer provably keeps: the model's
  // normalizer_spec (sentencepiece_model.proto) has no precompiled_charsmap
  // (identity: bytes kept, spaces become the longer "▁"; B = all bytes, or
  // all but ASCII whitespace when remove_extra_whitespaces collapses runs
  // of spaces), and all 256 byte pieces exist (byte_fallback: no run of
  // unknown characters collapses into one <unk>). Else 0 (e.g. nmt_nfkc,
  // which drops control characters).
  size_t min_token_count(std::string_view text) const override;
  // skip_special_tokens=true: control and unknown pieces (<s>, </s>, <unk>) are
  // dropped (HF drops all_special_ids, which include unk) and the rest is
  // sentencepiece DecodeIds (first piece's leading "▁" removed, byte pieces
  // fused into UTF-8, each invalid byte as U+FFFD).
  // skip_special_tokens=false: special pieces appear as their text ("<s>"),
  // normal runs as above, but a run that does not start the output keeps its
  // leading space (HF LlamaTokenizerFast: "<s> Hello").
  // An id >= vocab_size decodes to "" (HF tokenizers skip ids without a
  // token; a model's logits may have more rows than the vocabulary). A
  // negative id: std::out_of_range.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  // The piece; "" for an id >= vocab_size. Negative: std::out_of_range.
  std::string id_to_piece(int32_t id) const override;
  // Control (<s>, </s>) or unknown (<unk>) piece (false for an id >=
  // vocab_size). Negative: std::out_of_range.
  bool is_special(int32_t id) const override;
  int64_t vocab_size() const override;
  std::optional<int32_t> bos_token_id() const override { return bos_; }
  std::optional<int32_t> eos_token_id() const override { return eos_; }

 private:
  // id < vocab_size; throws std::out_of_range when id < 0.
  bool has_piece(int32_t id) const;
  std::string decode_run(const std::vector<int>& run) const;
  std::vector<int> sp_encode(std::string_view text) const;
  std::vector<int> encode_no_prefix(std::string_view text) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  TokenizerConfig config_;
  std::optional<int32_t> bos_;
  std::optional<int32_t> eos_;
  std::vector<std::pair<std::string, int32_t>> special_pieces_;  // longest first
  size_t max_bytes_per_token_ = 0;                               // min_token_count's M; 0: no bound
  bool skip_spaces_in_bound_ = false;  // remove_extra_whitespaces: spaces not counted
};

}  // namespace pagoda
