// Tokenizer's default implementations.
#include "engine/tokenizer/tokenizer.h"

#include <stdexcept>

namespace pagoda {

std::vector<int32_t> Tokenizer::encode_with_special_text(std::string_view) const {
  throw std::logic_error("this tokenizer cannot encode text containing special tokens");
}

}  // namespace pagoda
