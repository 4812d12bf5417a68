#include "engine/core/utf8.h"
#include "engine/tokenizer/bpe_byte_level.h"

#include <vector>

namespace pagoda::bpe {
namespace {

// Code point of each byte (bytes_to_unicode in GPT-2's encoder.py).
const std::array<uint32_t, 256>& byte_code_points() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    std::array<bool, 256> printable{};
    for (uint32_t b = '!'; b <= '~'; ++b) printable[b] = true;
    for (uint32_t b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (uint32_t b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) t[b] = printable[b] ? b : 256 + n++;
    return t;
  }();
  return table;
}

// Length of the valid UTF-8 sequence at s[i], or 0 if the bytes there do not
// start one; `sub` gets the length of the maximal invalid subpart (>= 1).
size_t valid_sequence(std::string_view s, size_t i, size_t& sub) {
  const auto c = static_cast<unsigned char>(s[i]);
  sub = 1;
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto d = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (d >= lo && d <= hi) : (d & 0xC0) == 0x80;
    if (!ok) return 0;
    sub = k + 1;
  }
  return n;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (size_t b = 0; b < 256; ++b) pagoda::append_utf8(t[b], byte_code_points()[b]);
    return t;
  }();
  return table;
}

std::optional<uint8_t> unicode_to_byte(uint32_t code_point) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(512, -1);  // every mapped code point is < 512
    for (int b = 0; b < 256; ++b) inv[byte_code_points()[static_cast<size_t>(b)]] = b;
    return inv;
  }();
  if (code_point >= inverse.size() || inverse[code_point] < 0) return std::nullopt;
  return static_cast<uint8_t>(inverse[code_point]);
}

std::string token_to_bytes(std::string_view token) {
  if (!is_valid_utf8(token)) return std::string(token);
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const auto b = unicode_to_byte(next_code_point(token, pos));
    if (!b) return std::string(token);
    out += static_cast<char>(*b);
  }
  return out;
}

bool is_valid_utf8(std::string_view s) { return !first_invalid_utf8(s); }

std::optional<size_t> first_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t sub;
    const size_t n = valid_sequence(s, i, sub);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t sub;
    const size_t n = valid_sequence(bytes, i, sub);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += sub;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

uint32_t next_code_point(std::string_view s, size_t& pos) {
  const auto c = static_cast<unsigned char>(s[pos]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n && pos + k < s.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  }
  pos += n;
  return cp;
}

}  // namespace pagoda::bpe
