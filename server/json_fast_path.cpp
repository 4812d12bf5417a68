#include "server/json_fast_path.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "engine/core/utf8.h"

namespace pagoda {

using nlohmann::json;

namespace {

constexpr uint64_t kOnes = ~uint64_t{0} / 255;  // 0x0101...01
constexpr uint64_t kHighs = kOnes * 0x80;       // 0x8080...80

// Whether any byte of w is zero (exact as a yes/no answer).
constexpr bool has_zero_byte(uint64_t w) { return ((w - kOnes) & ~w & kHighs) != 0; }

// Whether any of the 8 bytes at p ends a run of plain string bytes: a
// control character (< 0x20), '"', '\\' or a non-ASCII byte.
bool word_has_special(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  const bool below_space = ((w - kOnes * 0x20) & ~w & kHighs) != 0;
  return below_space || (w & kHighs) != 0 || has_zero_byte(w ^ (kOnes * '"')) ||
         has_zero_byte(w ^ (kOnes * '\\'));
}

bool in(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

class FastParser {
 public:
  FastParser(std::string_view text, int max_depth)
      : p_(text.data()), n_(text.size()), max_depth_(max_depth) {}

  std::optional<json> parse() {
    skip_ws();
    json value;
    if (!parse_value(value, 0)) return std::nullopt;
    skip_ws();
    if (pos_ != n_) return std::nullopt;
    return value;
  }

 private:
  void skip_ws() {
    while (pos_ < n_ &&
           (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r'))
      ++pos_;
  }

  bool literal(std::string_view word) {
    if (n_ - pos_ < word.size() || std::string_view(p_ + pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool parse_value(json& out, int depth) {
    if (pos_ >= n_) return false;
    switch (p_[pos_]) {
      case '{':
        return parse_object(out, depth + 1);
      case '[':
        return parse_array(out, depth + 1);
      case '"': {
        std::string s;
        if (!parse_string(s)) return false;
        out = json(std::move(s));
        return true;
      }
      case 't':
        out = true;
        return literal("true");
      case 'f':
        out = false;
        return literal("false");
      case 'n':
        out = nullptr;
        return literal("null");
      default:
        return parse_number(out);
    }
  }

  bool parse_object(json& out, int depth) {
    if (depth > max_depth_) return false;
    ++pos_;  // '{'
    out = json::object();
    auto& obj = out.get_ref<json::object_t&>();
    skip_ws();
    if (pos_ < n_ && p_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      if (pos_ >= n_ || p_[pos_] != '"') return false;
      std::string key;
      if (!parse_string(key)) return false;
      auto hint = obj.lower_bound(key);
      if (hint != obj.end() && hint->first == key) return false;  // a duplicate name
      skip_ws();
      if (pos_ >= n_ || p_[pos_] != ':') return false;
      ++pos_;
      skip_ws();
      json value;
      if (!parse_value(value, depth)) return false;
      obj.emplace_hint(hint, std::move(key), std::move(value));
      skip_ws();
      if (pos_ >= n_) return false;
      if (p_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (p_[pos_] != ',') return false;
      ++pos_;
      skip_ws();
    }
  }

  bool parse_array(json& out, int depth) {
    if (depth > max_depth_) return false;
    ++pos_;  // '['
    out = json::array();
    auto& arr = out.get_ref<json::array_t&>();
    skip_ws();
    if (pos_ < n_ && p_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      arr.emplace_back();
      if (!parse_value(arr.back(), depth)) return false;
      skip_ws();
      if (pos_ >= n_) return false;
      if (p_[pos_] == ']') {
        ++pos_;
        return true;
      }
      if (p_[pos_] != ',') return false;
      ++pos_;
      skip_ws();
    }
  }

  // One UTF-8 sequence of 2 to 4 bytes at pos_ (Unicode Table 3-7):
  // its length, or 0 when ill-formed.
  size_t utf8_length() const {
    const auto at = [&](size_t i) {
      return pos_ + i < n_ ? static_cast<unsigned char>(p_[pos_ + i]) : 0;
    };
    const unsigned char c = at(0);
    const auto cont = [&](size_t i) { return in(at(i), 0x80, 0xBF); };
    if (in(c, 0xC2, 0xDF)) return cont(1) ? 2 : 0;
    if (c == 0xE0) return in(at(1), 0xA0, 0xBF) && cont(2) ? 3 : 0;
    if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return in(at(1), 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return in(at(1), 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
    if (in(c, 0xF1, 0xF3)) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return in(at(1), 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  // Four hex digits after "\u" at pos_ (pos_ at the 'u').
  bool hex4(uint32_t& v) {
    if (n_ - pos_ < 5) return false;
    v = 0;
    for (size_t i = 1; i <= 4; ++i) {
      const char c = p_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    pos_ += 5;
    return true;
  }

  // An escape at pos_ (after the backslash), appended to out.
  bool escape(std::string& out) {
    if (pos_ >= n_) return false;
    const char c = p_[pos_];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out += c;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate alone
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low;
          if (n_ - pos_ < 2 || p_[pos_] != '\\' || p_[pos_ + 1] != 'u') return false;
          ++pos_;
          if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(out, cp);
        return true;  // pos_ already past the digits
      }
      default:
        return false;
    }
    ++pos_;
    return true;
  }

  // A string at pos_ (the opening quote) into out. Runs of bytes that need
  // no decoding are appended whole: a string without escapes is one copy
  // into a buffer of its exact size.
  bool parse_string(std::string& out) {
    ++pos_;  // '"'
    size_t run = pos_;
    while (true) {
      while (n_ - pos_ >= 8 && !word_has_special(p_ + pos_)) pos_ += 8;
      if (pos_ >= n_) return false;
      const auto c = static_cast<unsigned char>(p_[pos_]);
      if (c == '"') {
        out.append(p_ + run, pos_ - run);
        ++pos_;
        return true;
      }
      if (c == '\\') {
        out.append(p_ + run, pos_ - run);
        ++pos_;
        if (!escape(out)) return false;
        run = pos_;
      } else if (c < 0x20) {
        return false;
      } else if (c < 0x80) {
        ++pos_;
      } else {
        const size_t len = utf8_length();
        if (len == 0) return false;
        pos_ += len;
      }
    }
  }

  bool digit() const { return pos_ < n_ && p_[pos_] >= '0' && p_[pos_] <= '9'; }

  // RFC 8259's number grammar, converted as nlohmann does (see the header).
  bool parse_number(json& out) {
    const size_t start = pos_;
    const bool negative = p_[pos_] == '-';
    if (negative) ++pos_;
    if (!digit()) return false;
    if (p_[pos_] == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    bool integer = true;
    if (pos_ < n_ && p_[pos_] == '.') {
      ++pos_;
      if (!digit()) return false;
      while (digit()) ++pos_;
      integer = false;
    }
    if (pos_ < n_ && (p_[pos_] == 'e' || p_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < n_ && (p_[pos_] == '+' || p_[pos_] == '-')) ++pos_;
      if (!digit()) return false;
      while (digit()) ++pos_;
      integer = false;
    }
    const char* first = p_ + start;
    const char* last = p_ + pos_;
    if (integer) {
      if (negative) {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(first, last, v);
        if (ec == std::errc() && end == last) {
          out = json(static_cast<json::number_integer_t>(v));
          return true;
        }
      } else {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(first, last, v);
        if (ec == std::errc() && end == last) {
          out = json(static_cast<json::number_unsigned_t>(v));
          return true;
        }
      }
    }
    double d = 0;
    auto [end, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || end != last || !std::isfinite(d)) return false;
    out = json(static_cast<json::number_float_t>(d));
    return true;
  }

  const char* p_;
  size_t n_;
  size_t pos_ = 0;
  int max_depth_;
};

}  // namespace

std::optional<json> parse_json_fast_path(std::string_view text, int max_depth) {
  return FastParser(text, max_depth).parse();
}

}  // namespace pagoda
