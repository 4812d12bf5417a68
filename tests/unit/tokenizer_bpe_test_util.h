// Shared byte-level BPE tokenizers for the tests (Qwen2.5's tokenizer.json,
// Qwen2's vocab.json + merges.txt), loaded once per test binary.
#pragma once
#include <memory>

#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer_test_util.h"

namespace pagoda::test {

inline const Tokenizer& qwen25_json_tokenizer() {
  static const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared_path("tokenizers/qwen2.5"));
  return *tok;
}

inline const Tokenizer& qwen2_vocab_merges_tokenizer() {
  static const std::shared_ptr<Tokenizer> tok = load_tokenizer(shared_path("tokenizers/qwen2"));
  return *tok;
}

}  // namespace pagoda::test
