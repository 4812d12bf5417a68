// Unicode case mapping for the str.upper / lower / title / capitalize methods
// and filters, following Python's str methods (Unicode simple case mappings
// from UnicodeData.txt, plus the full mapping of U+00DF ß -> "SS").
// Covered: ASCII, Latin-1 Supplement, Latin Extended-A, Greek, Cyrillic,
// Armenian and fullwidth Latin; other code points (e.g. CJK, which has no
// case) are copied unchanged. Invalid UTF-8 bytes are copied unchanged.
#pragma once
#include <cstdint>
#include <string>

namespace pagoda::jinja {

std::string utf8_upper(const std::string& s);
std::string utf8_lower(const std::string& s);
std::string utf8_title(const std::string& s);       // Python str.title()
std::string utf8_capitalize(const std::string& s);  // Python str.capitalize()

// Decodes one code point at s[i] (advancing i); an invalid byte decodes as
// itself with `valid` false (callers copy it verbatim).
uint32_t utf8_decode(const std::string& s, size_t& i, bool& valid);

// Python's str.isprintable() for one code point: false for the categories
// Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than ' ' (the table in
// jinja_printable.cpp, generated from Python's Unicode database).
bool py_isprintable(uint32_t cp);

}  // namespace pagoda::jinja
