// Unicode case mapping (see jinja_unicode.h). Ranges from UnicodeData.txt.
#include "engine/core/utf8.h"
#include "engine/chat/jinja_unicode.h"

#include <vector>

namespace pagoda::jinja {

uint32_t utf8_decode(const std::string& s, size_t& i, bool& valid) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
  valid = n >= 0 && i + static_cast<size_t>(n) < s.size();
  if (!valid) {
    ++i;
    return c;
  }
  uint32_t cp = n == 0 ? c : (c & (0x3F >> n));
  for (int k = 1; k <= n; ++k) {
    unsigned char d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((d & 0xC0) != 0x80) {
      valid = false;
      ++i;
      return c;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  i += static_cast<size_t>(n) + 1;
  return cp;
}

namespace {

uint32_t decode(const std::string& s, size_t& i, bool& valid) { return utf8_decode(s, i, valid); }

// Latin Extended-A alternates upper (even) / lower (odd) except in
// U+0139..U+0148 and U+0179..U+017E, where upper is odd.
bool latin_ext_a_pair(uint32_t cp) {
  return cp >= 0x0100 && cp <= 0x017F && cp != 0x0130 && cp != 0x0131 && cp != 0x0138 && cp != 0x0149 &&
         cp != 0x0178 && cp != 0x017F;
}
bool latin_ext_a_upper_is_odd(uint32_t cp) {
  return (cp >= 0x0139 && cp <= 0x0148) || (cp >= 0x0179 && cp <= 0x017E);
}
bool cyrillic_pair(uint32_t cp) {
  return (cp >= 0x0460 && cp <= 0x0481) || (cp >= 0x048A && cp <= 0x04BF) || (cp >= 0x04D0 && cp <= 0x04FF);
}

uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (latin_ext_a_pair(c)) {
    bool odd_upper = latin_ext_a_upper_is_odd(c);
    bool is_lower = odd_upper ? (c % 2 == 0) : (c % 2 == 1);
    return is_lower ? c - 1 : c;
  }
  if (c == 0x0131) return 'I';
  if (c == 0x017F) return 'S';
  if (c >= 0x03B1 && c <= 0x03C9 && c != 0x03C2) return c - 0x20;
  if (c == 0x03C2) return 0x03A3;
  if (c == 0x03AC) return 0x0386;
  if (c >= 0x03AD && c <= 0x03AF) return c - 0x25;
  if (c == 0x03CC) return 0x038C;
  if (c == 0x03CD || c == 0x03CE) return c - 0x3F;
  if (c >= 0x0430 && c <= 0x044F) return c - 0x20;
  if (c >= 0x0450 && c <= 0x045F) return c - 0x50;
  if (cyrillic_pair(c)) return c % 2 == 1 ? c - 1 : c;
  if (c >= 0x0561 && c <= 0x0586) return c - 0x30;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 0x20;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (latin_ext_a_pair(c)) {
    bool odd_upper = latin_ext_a_upper_is_odd(c);
    bool is_upper = odd_upper ? (c % 2 == 1) : (c % 2 == 0);
    return is_upper ? c + 1 : c;
  }
  if (c == 0x0130) return 'i';  // Python gives "i̇"; the combining dot is dropped here
  if (c >= 0x0391 && c <= 0x03A9 && c != 0x03A2) return c + 0x20;
  if (c == 0x0386) return 0x03AC;
  if (c >= 0x0388 && c <= 0x038A) return c + 0x25;
  if (c == 0x038C) return 0x03CC;
  if (c == 0x038E || c == 0x038F) return c + 0x3F;
  if (c >= 0x0410 && c <= 0x042F) return c + 0x20;
  if (c >= 0x0400 && c <= 0x040F) return c + 0x50;
  if (cyrillic_pair(c)) return c % 2 == 0 ? c + 1 : c;
  if (c >= 0x0531 && c <= 0x0556) return c + 0x30;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  return c;
}

bool is_cased(uint32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0xDF; }

enum class Mode { Upper, Lower, Title, Capitalize };

std::string map_case(const std::string& s, Mode mode) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    bool valid;
    uint32_t c = decode(s, i, valid);
    if (!valid) {
      out += s[start];
      prev_cased = false;
      first = false;
      continue;
    }
    bool upper;
    if (mode == Mode::Upper) upper = true;
    else if (mode == Mode::Lower) upper = false;
    else if (mode == Mode::Title) upper = !prev_cased;
    else upper = first;
    if (upper && c == 0xDF) {
      out += mode == Mode::Upper ? "SS" : "Ss";
    } else if (!upper && c == 0x03A3) {
      // Final sigma (Unicode SpecialCasing): a word-final capital sigma
      // after a cased letter lowers to U+03C2.
      bool next_cased = false;
      if (i < s.size()) {
        size_t j = i;
        bool v;
        uint32_t next = decode(s, j, v);
        next_cased = v && is_cased(next);
      }
      pagoda::append_utf8(out, prev_cased && !next_cased ? 0x03C2 : 0x03C3);
    } else {
      pagoda::append_utf8(out, upper ? to_upper(c) : to_lower(c));
    }
    prev_cased = is_cased(c);
    first = false;
  }
  return out;
}

}  // namespace

std::string utf8_upper(const std::string& s) { return map_case(s, Mode::Upper); }
std::string utf8_lower(const std::string& s) { return map_case(s, Mode::Lower); }
std::string utf8_title(const std::string& s) { return map_case(s, Mode::Title); }
std::string utf8_capitalize(const std::string& s) { return map_case(s, Mode::Capitalize); }

}  // namespace pagoda::jinja
