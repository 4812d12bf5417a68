// Tokenizing prompt text the way Hugging Face tokenizers do when the text
// contains special-token strings (a chat template writes "<s>", "</s>"...):
// the special strings are split out and become their ids, and the text
// between them is encoded by the model's tokenizer. SentencePiece alone
// would spell "<s>" as the pieces "<", "s", ">".
//
// The dummy-prefix rule follows transformers' LlamaTokenizer: with
// legacy=false (prepend_scheme "first"), only the text at the very start
// gets SentencePiece's "▁" prefix, a segment after a special token does not;
// with legacy=true every segment gets it. Without a prefix is done as
// transformers' slow tokenizer does it (encode(marker + segment), drop the
// marker's pieces), with a marker that cannot merge with what follows: a
// private-use character (U+E000) that is not in the vocabulary, so it is
// its own symbol (byte fallback / unk). transformers' own marker, the
// "<unk>" text, does merge (">[" in Llama's vocabulary).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

struct SpecialTokenText {
  std::string text;  // e.g. "<s>"
  int32_t id = 0;
};

struct PromptTokenizerOptions {
  std::vector<SpecialTokenText> specials;  // bos/eos/unk strings and ids
  std::string marker = "\xEE\x80\x80";     // U+E000, for the no-prefix trick
  bool legacy = false;                     // tokenizer_config.json "legacy"
};

// The options for a Hugging Face model directory: bos/eos strings and ids
// from the tokenizer config and tokenizer, "legacy" from
// <dir>/tokenizer_config.json (default false, as transformers 5).
PromptTokenizerOptions prompt_tokenizer_options(const std::string& model_dir, const TokenizerConfig& tc,
                                                const Tokenizer& tok);

// Token ids of text. add_special_tokens as Tokenizer::encode (BOS first when
// the tokenizer adds one). Text without special strings is exactly
// tok.encode(text, add_special_tokens).
std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special_tokens,
                                   const PromptTokenizerOptions& opts);

}  // namespace pagoda
