// Hugging Face byte-level BPE tokenizer (GPT-2 / Qwen2 family) as HF
// tokenizers 0.2x runs a tokenizer.json of model type "BPE" with a ByteLevel
// decoder: added tokens split out of the text first, then per segment the
// normalizer (NFC or none), the Split regex pre-tokenizer (Isolated), the
// byte map and the BPE merges; decoding maps tokens back to bytes.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {
namespace bpe {
class BpeModel;
class RegexSplitter;
}  // namespace bpe

// One entry of tokenizer.json "added_tokens" (or tokenizer_config.json
// "added_tokens_decoder").
struct BpeAddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;     // dropped by decode(skip_special_tokens=true)
  bool lstrip = false;      // match absorbs ASCII whitespace on its left
  bool rstrip = false;      // match absorbs ASCII whitespace on its right
  bool normalized = false;  // matched on the raw text all the same (see encode)
  bool single_word = false; // not supported: such a token gives std::runtime_error
};

// Everything a byte-level BPE tokenizer is built from (bpe_loader.h reads it).
struct BpeSpec {
  std::unordered_map<std::string, int32_t> vocab;           // byte-level token -> id
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  std::vector<BpeAddedToken> added_tokens;
  std::string pattern;  // Split regex (PCRE2 syntax), applied Isolated
  bool nfc = false;     // normalizer NFC
  bool ignore_merges = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws std::runtime_error when the spec is unusable (a merge with an
  // unknown token, a regex that does not compile, built without PCRE2, NFC
  // asked for but built without utf8proc, a single_word added token). BOS/EOS
  // ids: config.bos_token/eos_token looked up among added tokens then vocab
  // (none when the text is empty or unknown; Qwen2 has no BOS).
  BpeTokenizer(BpeSpec spec, const TokenizerConfig& config);
  ~BpeTokenizer() override;

  // HF tokenizers' encode: added tokens' text in `text` (longest match at the
  // leftmost position) becomes their ids whatever add_special_tokens says (HF
  // splits added tokens unless split_special_tokens; the qwen2 vectors of
  // testvectors/tokenizer_encodings.json, made with add_special_tokens=false,
  // have <|im_start|> as id 151644); every other segment is NFC-normalized
  // (when the spec says so), split by the regex and BPE-encoded.
  // add_special_tokens: BOS first when config.add_bos_token and a BOS exists,
  // EOS last when config.add_eos_token. Added tokens with normalized=true
  // are matched on the raw text too (the same for NFC-stable contents).
  // Throws std::invalid_argument for text that is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  // encode(text, false): the rendered prompt's special-token text is parsed
  // as above and nothing is added (vLLM's chat path).
  std::vector<int32_t> encode_with_special_text(std::string_view text) const override;
  // encode(text, false) that stops after the pre-tokenized piece (or added
  // token) that takes the ids past max_tokens: memory and time
  // proportional to max_tokens, not to the text (beyond one UTF-8 check
  // and the NFC of the segment being encoded).
  std::vector<int32_t> encode_with_special_text_bounded(std::string_view text,
                                                        size_t max_tokens) const override;
  // ceil(bytes / M), M the most input bytes one token can cover: the
  // longest token's bytes (byte-level BPE maps every input byte to exactly
  // one token byte; an added token covers its content), times 3 with the NFC
  // normalizer (composition shrinks UTF-8 at most 3x: Hangul L+V+T jamo, 9
  // bytes, become one 3-byte syllable; Latin/Greek base + marks at most
  // 8 -> 3). 0 when an added token has lstrip/rstrip (it can absorb any
  // run of whitespace).
  size_t min_token_count(std::string_view text) const override;
  // HF decode: each token's string, through the ByteLevel decoder (mapped
  // back to bytes when every character is in the byte map, else its own
  // bytes), then the bytes as UTF-8 with U+FFFD per invalid subpart (HF's
  // from_utf8_lossy, Python's errors="replace"). skip_special_tokens drops
  // added tokens marked special. An id >= 0 that is neither in the vocab nor
  // an added token decodes to "" (HF tokenizers' decode skips ids it has no
  // token for; Qwen2's logits have 151,936 rows, its tokenizer 151,665
  // tokens, and a model can sample the rest). A negative id: std::out_of_range.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  // Byte-level token string ("ĠHello"), or an added token's content; "" for
  // an id without a token (as decode). Negative id: std::out_of_range.
  std::string id_to_piece(int32_t id) const override;
  // Added token marked special (<|endoftext|>, <|im_start|>, ...).
  bool is_special(int32_t id) const override;
  // Largest id + 1 over vocab and added tokens (HF len(tokenizer)).
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::optional<int32_t> bos_token_id() const override { return bos_; }
  std::optional<int32_t> eos_token_id() const override { return eos_; }

 private:
  // Whether id has a token (vocab or added); throws std::out_of_range when
  // id < 0.
  bool has_token(int32_t id) const;
  // Appends segment's ids; stops once out has more than max_tokens ids.
  void encode_segment(std::string_view segment, std::vector<int32_t>& out,
                      size_t max_tokens = static_cast<size_t>(-1)) const;
  // Leftmost-longest added token at or after pos: (start, end, index), with
  // lstrip/rstrip whitespace included in [start, end); start == npos if none.
  struct Match {
    size_t start;
    size_t end;
    size_t token;
  };
  Match find_added(std::string_view text, size_t pos) const;

  std::unique_ptr<bpe::BpeModel> model_;
  std::unique_ptr<bpe::RegexSplitter> splitter_;
  bool nfc_ = false;
  TokenizerConfig config_;
  std::vector<BpeAddedToken> added_;                    // longest content first
  std::array<std::vector<size_t>, 256> added_by_byte_;  // first byte -> indices into added_
  std::vector<std::string> pieces_;                     // id -> token string ("" if unused id)
  std::vector<std::string> bytes_;                      // id -> decoded bytes
  std::vector<uint8_t> kind_;                           // id -> 0 unused, 1 vocab, 2 added, 3 special
  std::optional<int32_t> bos_;
  std::optional<int32_t> eos_;
  size_t max_bytes_per_token_ = 0;  // min_token_count's M; 0: no bound
};

}  // namespace pagoda
