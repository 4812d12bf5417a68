// The body both tokenizer fuzz targets share: arbitrary bytes through every
// Tokenizer entry point the server uses. The input's first byte picks the
// mode: encode the rest as text (with and without special tokens, and as a
// rendered prompt with special-token text), or read the rest as little-endian
// 16-bit (scaled to the vocabulary) token ids and decode them, at once and
// incrementally with the Detokenizer. Invariants: no crash or sanitizer
// report; every encoded id is inside the vocabulary; only text that is not
// UTF-8 may be refused (std::invalid_argument, byte-level BPE).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda::fuzz {

inline void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
}

inline void fuzz_tokenizer(const Tokenizer& tok, const uint8_t* data, size_t size) {
  if (size < 1) return;
  const uint8_t mode = data[0];
  ++data;
  --size;
  if (mode % 2 == 0) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
      check_ids(tok, tok.encode(text, true));
      check_ids(tok, tok.encode(text, false));
      std::vector<int32_t> ids = tok.encode_with_special_text(text);
      check_ids(tok, ids);
      (void)tok.decode(ids, false);
    } catch (const std::invalid_argument&) {
      // Byte-level BPE refuses text that is not UTF-8 (documented); the
      // server only hands it UTF-8 (JSON strings, rendered templates).
      if (bpe::is_valid_utf8(text)) std::abort();
    }
    return;
  }
  // Ids: in the vocabulary, plus (for decode only) ids past it, which the
  // model's logits may have (Tokenizer::decode gives no text for them).
  const int64_t vocab = tok.vocab_size();
  std::vector<int32_t> ids, in_vocab;
  for (size_t i = 0; i + 1 < size; i += 2) {
    uint32_t v = data[i] | (uint32_t{data[i + 1]} << 8);
    int32_t id = static_cast<int32_t>(static_cast<int64_t>(v) * (vocab + 64) / 65536);
    ids.push_back(id);
    if (id < vocab) in_vocab.push_back(id);
  }
  (void)tok.decode(ids, true);
  (void)tok.decode(ids, false);
  for (int32_t id : ids) {
    (void)tok.id_to_piece(id);
    (void)tok.is_special(id);
  }
  const bool skip = mode & 2;
  size_t prompt = in_vocab.size() / 3;
  Detokenizer detok(tok, std::vector<int32_t>(in_vocab.begin(), in_vocab.begin() + prompt), skip);
  for (size_t i = prompt; i < in_vocab.size(); ++i) (void)detok.step(in_vocab[i]);
  (void)detok.flush();
}

}  // namespace pagoda::fuzz
