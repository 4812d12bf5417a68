// libFuzzer target: the SentencePiece tokenizer (bundled
// models/stories260K/tokenizer.model) on arbitrary bytes (tokenizer_fuzz.h).
#include <memory>
#include <string>

#include "tests/fuzz/tokenizer_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<pagoda::Tokenizer> tok =
      pagoda::load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  pagoda::fuzz::fuzz_tokenizer(*tok, data, size);
  return 0;
}
