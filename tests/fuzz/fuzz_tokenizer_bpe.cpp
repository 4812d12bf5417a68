// libFuzzer target: the byte-level BPE tokenizer (Qwen2's vocab.json +
// merges.txt from the shared assets, ../shared/tokenizers/qwen2) on
// arbitrary bytes (tokenizer_fuzz.h).
#include <memory>
#include <string>

#include "tests/fuzz/tokenizer_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<pagoda::Tokenizer> tok =
      pagoda::load_tokenizer(std::string(PAGODA_SHARED_DIR) + "/tokenizers/qwen2");
  pagoda::fuzz::fuzz_tokenizer(*tok, data, size);
  return 0;
}
