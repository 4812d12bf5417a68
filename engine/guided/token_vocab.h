// TokenVocab: each token id's byte string (what the token adds to the
// output's UTF-8 bytes) and a trie over them, for computing which tokens an
// automaton state allows (guide.h).
//
// Byte strings: byte-level BPE (GPT-2 / Qwen2): the token's characters
// mapped back through GPT-2's bytes_to_unicode (bpe::token_to_bytes);
// SentencePiece: "<0xAB>" byte-fallback pieces are the byte 0xAB, other
// pieces their text with U+2581 "▁" as a space; any other tokenizer:
// decode() of the id alone. Special tokens (BOS, EOS,
// control and unknown pieces: Tokenizer::is_special) and ids without a
// token get no byte string: a constraint never allows them as text (EOS is
// allowed separately, when the automaton accepts).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda::guided {

class TokenVocab {
 public:
  // Trie node: tokens whose byte string ends here, children by byte.
  struct Node {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t first_token = -1;  // head of a list through token_next()
    uint8_t byte = 0;
  };

  explicit TokenVocab(const Tokenizer& tok);

  // The vocabulary shared by every guide of one tokenizer: built on first
  // use and reused while that tokenizer object is alive and a guide holds
  // the vocabulary. Throws std::invalid_argument on a null tokenizer.
  static std::shared_ptr<const TokenVocab> of(const std::shared_ptr<const Tokenizer>& tok);

  // Number of token ids (Tokenizer::vocab_size()): the width of a mask.
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  // Byte string of id ("" for special tokens and ids out of range).
  const std::string& bytes(int32_t id) const;
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root
  int32_t token_next(int32_t id) const { return token_next_[static_cast<size_t>(id)]; }
  // True when some token's byte string is exactly the one byte `b`.
  bool has_single_byte_token(uint8_t b) const { return single_byte_[b]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_next_;
  std::array<bool, 256> single_byte_{};
};

// One token's byte string, as above (exposed for tests).
std::string token_byte_string(const Tokenizer& tok, int32_t id);

}  // namespace pagoda::guided
