// Tokenizer: one interface over SentencePiece (tokenizer.model) and
// byte-level BPE (tokenizer.json / vocab.json + merges.txt). The kind comes
// from the files present, not the model's name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of text. add_special_tokens: prepend BOS when the tokenizer
  // config says add_bos_token (HF semantics), append EOS when add_eos_token.
  // Special-token text inside `text` is not parsed as control tokens by
  // SentencePiece (as sentencepiece itself behaves).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // Token ids of a rendered prompt (chat template output) in which special
  // tokens' text ("<s>", "</s>", "<unk>" for SentencePiece: its control and
  // unknown pieces) stands for those tokens, as HF tokenizers split added
  // tokens out of the text (vLLM tokenizes rendered chat prompts so, with
  // add_special_tokens=false; nothing else is added). Text between special
  // tokens gets the "▁" dummy prefix only where it starts `text` (HF
  // LlamaTokenizerFast: Metaspace prepend_scheme "first"), or every segment
  // when TokenizerConfig::legacy. The base version throws std::logic_error
  // (a tokenizer that does not support it).
  virtual std::vector<int32_t> encode_with_special_text(std::string_view text) const;
  // encode_with_special_text(text), but the tokenizer may stop once more
  // than max_tokens ids are known: the result then has more than max_tokens
  // ids and is a prefix of the full encoding (the caller refuses the text;
  // its size is a lower bound on the count). A text of at most max_tokens
  // tokens gives exactly encode_with_special_text(text). The base version
  // encodes everything; byte-level BPE stops early (its pre-tokenized
  // pieces are encoded independently, so counting as it goes is exact).
  virtual std::vector<int32_t> encode_with_special_text_bounded(std::string_view text,
                                                                size_t max_tokens) const {
    (void)max_tokens;
    return encode_with_special_text(text);
  }
  // A lower bound on encode(text, false).size() and
  // encode_with_special_text(text).size(), computed without tokenizing
  // (O(1), no allocation): the server refuses a prompt whose bound already
  // exceeds max_model_len before it spends time and memory on it. Proven
  // from the vocabulary: every token covers at most max_token_bytes of the
  // input, so a text of B bytes needs at least ceil(B / max) tokens (see
  // each tokenizer for the conditions). 0 when nothing can be proven.
  virtual size_t min_token_count(std::string_view text) const {
    (void)text;
    return 0;
  }
  // Text of ids. skip_special_tokens drops control tokens (BOS/EOS/UNK...).
  // An id >= 0 the tokenizer has no token for (>= vocab_size(): a model's
  // logits may have more rows, Qwen2 151,936 to its tokenizer's 151,665)
  // gives no text, as HF tokenizers' decode skips it; a negative id throws
  // std::out_of_range. id_to_piece gives "" and is_special false for it.
  // May end in an incomplete UTF-8 sequence's replacement (U+FFFD); the
  // Detokenizer deals with that when streaming.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;
  // The piece's surface string (SentencePiece piece, e.g. "▁Hello").
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;

  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;
};

// Settings from tokenizer_config.json (HF PreTrainedTokenizer fields).
struct TokenizerConfig {
  bool add_bos_token = true;
  bool add_eos_token = false;
  // "legacy" (HF LlamaTokenizer; absent = false, as transformers 5): true
  // gives every text segment between special tokens SentencePiece's "▁"
  // dummy prefix in encode_with_special_text, false only the first.
  bool legacy = false;
  std::string bos_token;     // text, e.g. "<s>" ("" if none)
  std::string eos_token;     // text, e.g. "</s>"
  std::string chat_template; // Jinja source ("" if none)
  // Reads <dir>/tokenizer_config.json if present (defaults otherwise);
  // chat_template may be a string or a list of {name, template} (the
  // "default" one is taken). Throws std::runtime_error naming the file when
  // it is malformed.
  static TokenizerConfig from_dir(const std::string& model_dir);
};

// Loads the tokenizer of a HF model directory, the kind from the files:
// tokenizer.json of model type "BPE" with a ByteLevel decoder or
// pre-tokenizer -> byte-level BPE (BpeTokenizer); else tokenizer.model ->
// SentencePiece; else vocab.json + merges.txt -> byte-level BPE. Throws
// std::runtime_error naming the directory when no supported tokenizer file is
// present, it fails to load, or it is BPE and Pagoda was built without PCRE2.
std::shared_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

}  // namespace pagoda
