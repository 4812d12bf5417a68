// Unicode normalization for HF tokenizers' "NFC" normalizer, on utf8proc
// (https://juliastrings.github.io/utf8proc/, utf8proc_NFC).
#pragma once
#include <string>
#include <string_view>

namespace pagoda::bpe {

// True when built with utf8proc (PAGODA_HAVE_UTF8PROC).
bool nfc_available();

// NFC (Unicode Standard Annex #15) of valid UTF-8 `text`. Throws
// std::runtime_error when built without utf8proc or when utf8proc rejects the
// text (invalid UTF-8).
std::string nfc(std::string_view text);

}  // namespace pagoda::bpe
