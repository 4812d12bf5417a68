// libFuzzer target: the SentencePiece tokenizer (bundled
// models/stories260K/tokenizer.model) on arbitrary bytes (tokenizer_fuzz.h).
#include <memory>
#include <string>

#include "tests/fuzz/tokenizer_fuzz.h"

namespace {

// Loaded before fuzzing starts (LLVMFuzzerInitialize): loading is not
// subject to -timeout, which a big vocabulary under ASan can exceed.
const pagoda::Tokenizer& tokenizer() {
  static const std::shared_ptr<pagoda::Tokenizer> tok =
      pagoda::load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::fuzz_tokenizer(tokenizer(), data, size);
  return 0;
}
