#include "engine/tokenizer/bpe_normalizer.h"

#include <cstdlib>
#include <stdexcept>

#ifdef PAGODA_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

namespace pagoda::bpe {

#ifdef PAGODA_HAVE_UTF8PROC

bool nfc_available() { return true; }

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &out,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    throw std::runtime_error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

#else

bool nfc_available() { return false; }

std::string nfc(std::string_view) {
  throw std::runtime_error(
      "the tokenizer's NFC normalizer needs utf8proc: Pagoda was built without it (install "
      "libutf8proc-dev and reconfigure)");
}

#endif

}  // namespace pagoda::bpe
