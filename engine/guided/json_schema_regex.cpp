#include "engine/guided/json_schema_regex.h"

// GCC 12's -Wrestrict false positive on `"literal" + std::string&&`
// (GCC bug 105329) fires on this file's string building at -O3.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "engine/guided/regex_dfa.h"

namespace pagoda::guided {
namespace {

using json = nlohmann::ordered_json;
using Re = std::optional<std::string>;  // nullopt: no document can match (dropped branch)

// One JSON string character: anything but '"', '\' and controls, or a
// two-character escape.
constexpr std::string_view kStringChar = R"((?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]))";
constexpr std::string_view kInteger = "-?(?:0|[1-9][0-9]*)";
constexpr std::string_view kNumber = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";
constexpr size_t kMaxPatternBytes = 1 << 20;
constexpr long long kMaxBound = 100'000'000'000'000'000LL;  // |bounds| clamped here (1e17)

std::string group(const std::string& r) { return "(?:" + r + ")"; }

std::string alternation(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '|';
    out += p;
  }
  return group(out);
}

// Same-length digit strings a <= b (leading zeros allowed): a regex of the
// digit strings between them.
std::string same_length_range(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a.size() == 1) return a == b ? a : fmt::format("[{}-{}]", a, b);
  if (a[0] == b[0]) return a.substr(0, 1) + same_length_range(a.substr(1), b.substr(1));
  const size_t rest = a.size() - 1;
  const std::string zeros(rest, '0'), nines(rest, '9');
  std::vector<std::string> parts;
  char lo_first = a[0], hi_first = b[0];
  if (a.substr(1) != zeros) {
    parts.push_back(a.substr(0, 1) + same_length_range(a.substr(1), nines));
    ++lo_first;
  }
  std::string tail_hi;
  if (b.substr(1) != nines) {
    tail_hi = b.substr(0, 1) + same_length_range(zeros, b.substr(1));
    --hi_first;
  }
  if (lo_first <= hi_first) {
    std::string first = lo_first == hi_first ? std::string(1, lo_first)
                                             : fmt::format("[{}-{}]", lo_first, hi_first);
    parts.push_back(first + fmt::format("[0-9]{{{}}}", rest));
  }
  if (!tail_hi.empty()) parts.push_back(tail_hi);
  return parts.size() == 1 ? parts[0] : alternation(parts);
}

std::string nonneg_range(unsigned long long lo, unsigned long long hi) {
  std::vector<std::string> parts;
  unsigned long long start = lo;
  while (start <= hi) {
    const std::string s = std::to_string(start);
    unsigned long long top = 9;
    for (size_t i = 1; i < s.size(); ++i) top = top * 10 + 9;
    const unsigned long long end = std::min(hi, top);
    parts.push_back(same_length_range(s, std::to_string(end)));
    if (end == hi) break;
    start = end + 1;
  }
  return parts.size() == 1 ? parts[0] : alternation(parts);
}

// ---- Bounded numbers: an exact regex of the decimal strings in [lo, hi] ----
//
// A decimal is kept exactly as digit strings (no doubles in the
// comparisons): sign, integer digits without leading zeros ("0" for zero)
// and fraction digits without trailing zeros.
struct Decimal {
  bool neg = false;
  std::string int_digits = "0";
  std::string frac_digits;
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
};

// `text`: a JSON number's text ("-12.5e-3"), as nlohmann writes a double
// (the shortest text that reads back as it) or an integer.
Decimal parse_decimal(std::string_view text) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.neg = true;
    ++i;
  }
  std::string digits;  // all significant digits, the point after `point` of them
  long long point = 0;
  bool seen_point = false;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      seen_point = true;
      continue;
    }
    digits += text[i];
    if (!seen_point) ++point;
  }
  if (i < text.size()) point += std::stoll(std::string(text.substr(i + 1)));
  // Pad so that 0 <= point <= digits.size().
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (static_cast<size_t>(point) > digits.size())
    digits.append(static_cast<size_t>(point) - digits.size(), '0');
  d.int_digits = digits.substr(0, static_cast<size_t>(point));
  d.frac_digits = digits.substr(static_cast<size_t>(point));
  const size_t nz = d.int_digits.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : d.int_digits.substr(nz);
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  if (d.is_zero()) d.neg = false;
  return d;
}

// Compares non-negative integer digit strings (no leading zeros).
int cmp_int(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : a.compare(b) > 0 ? 1 : 0;
}
// Compares fractions 0.a and 0.b (no trailing zeros).
int cmp_frac(const std::string& a, const std::string& b) {
  const int c = a.compare(b);  // without trailing zeros, a prefix is the smaller
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}
int cmp_abs(const Decimal& a, const Decimal& b) {
  const int c = cmp_int(a.int_digits, b.int_digits);
  return c != 0 ? c : cmp_frac(a.frac_digits, b.frac_digits);
}
int cmp_decimal(const Decimal& a, const Decimal& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  return a.neg ? -cmp_abs(a, b) : cmp_abs(a, b);
}
// A bound's digits before / after the point (each digit nests a group).
constexpr size_t kMaxBoundDigits = 60;
// A bounded number's fraction digits, at most (decimal_range_regex). Without
// a limit a model can write "3.3333..." until max_tokens (the random test
// model of GuidedAcceptance did, in several cases); 16 digits is past a
// double's precision.
constexpr size_t kMaxFractionDigits = 16;

// The digit string one more / one less than a non-negative integer.
std::string inc_int(std::string s) {
  size_t i = s.size();
  while (i > 0 && s[i - 1] == '9') s[--i] = '0';
  if (i == 0) return "1" + s;
  ++s[i - 1];
  return s;
}
std::string dec_int(std::string s) {  // s > 0
  size_t i = s.size();
  while (s[i - 1] == '0') s[--i] = '9';
  --s[i - 1];
  if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

std::string digit_class(char lo, char hi) {
  return lo == hi ? std::string(1, lo) : fmt::format("[{}-{}]", lo, hi);
}

// Integers (no leading zeros) in [lo, hi]; hi nullopt: unbounded. nullopt
// when none.
Re int_digits_range(const std::string& lo, const std::optional<std::string>& hi) {
  if (hi && cmp_int(lo, *hi) > 0) return std::nullopt;
  std::vector<std::string> parts;
  const size_t top = hi ? hi->size() : lo.size();
  for (size_t len = lo.size(); len <= top; ++len) {
    if (len > lo.size() && hi && len < hi->size()) {  // whole lengths, together
      parts.push_back(fmt::format("[1-9][0-9]{{{},{}}}", len - 1, hi->size() - 2));
      len = hi->size() - 1;
      continue;
    }
    const std::string a = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    const std::string b = hi && len == hi->size() ? *hi : std::string(len, '9');
    parts.push_back(same_length_range(a, b));
  }
  if (!hi) parts.push_back(fmt::format("[1-9][0-9]{{{},}}", lo.size()));
  return parts.size() == 1 ? group(parts[0]) : alternation(parts);
}

// A set of digit strings, the empty one apart: `more` matches the non-empty
// members (nullopt: none), `empty` says whether "" is one.
struct Digits {
  Re more;
  bool empty = false;
};
Digits digits_union(const Digits& a, const Digits& b) {
  Digits out{std::nullopt, a.empty || b.empty};
  std::vector<std::string> parts;
  if (a.more) parts.push_back(*a.more);
  if (b.more) parts.push_back(*b.more);
  if (!parts.empty()) out.more = parts.size() == 1 ? parts[0] : alternation(parts);
  return out;
}
// `first` (a digit or class) then a member of `rest`.
Digits digits_after(const std::string& first, const Digits& rest) {
  if (!rest.more && !rest.empty) return {};
  if (!rest.more) return {first, false};
  return {first + (rest.empty ? group(*rest.more) + "?" : group(*rest.more)), false};
}
// Fractions are at most n digits long (n >= 0 below): up to n more digits.
std::string up_to(size_t n) { return n == 0 ? "" : fmt::format("[0-9]{{0,{}}}", n); }
// Non-empty digit strings of at most n digits, not all zeros.
Digits not_all_zeros(size_t n) {
  std::vector<std::string> parts;  // by the position of the first non-zero digit
  for (size_t k = 0; k < n; ++k)
    parts.push_back((k ? fmt::format("0{{{}}}", k) : "") + "[1-9]" + up_to(n - 1 - k));
  if (parts.empty()) return {};
  return {parts.size() == 1 ? parts[0] : alternation(parts), false};
}

// Fractions F (digit strings, maybe empty, at most n digits) with
// 0.F >= 0.c (> when !incl); c without trailing zeros.
Digits frac_ge(std::string_view c, bool incl, size_t n) {
  if (c.empty()) {
    if (incl) return {n ? Re(fmt::format("[0-9]{{1,{}}}", n)) : std::nullopt, true};
    return not_all_zeros(n);
  }
  if (n == 0) return {};
  Digits out = digits_after(std::string(1, c[0]), frac_ge(c.substr(1), incl, n - 1));
  if (c[0] < '9')
    out = digits_union(out, {digit_class(static_cast<char>(c[0] + 1), '9') + up_to(n - 1), false});
  return out;
}
// Fractions F (at most n digits) with 0.F <= 0.c (< when !incl).
Digits frac_le(std::string_view c, bool incl, size_t n) {
  if (c.empty()) {
    if (incl) return {n ? Re(fmt::format("0{{1,{}}}", n)) : std::nullopt, true};
    return {};
  }
  // "" (0 < 0.c: c has a non-zero digit), a smaller first digit, or c[0]
  // and the rest.
  if (n == 0) return {std::nullopt, true};
  Digits out = digits_after(std::string(1, c[0]), frac_le(c.substr(1), incl, n - 1));
  out.empty = true;
  if (c[0] > '0')
    out = digits_union(out, {digit_class('0', static_cast<char>(c[0] - 1)) + up_to(n - 1), false});
  return out;
}
// Fractions F (at most n digits) with 0.a <= 0.F <= 0.b (strict per flag);
// 0.a <= 0.b.
Digits frac_between(std::string_view a, std::string_view b, bool incl_a, bool incl_b, size_t n) {
  if (a.empty() && b.empty())
    return incl_a && incl_b ? Digits{n ? Re(fmt::format("0{{1,{}}}", n)) : std::nullopt, true}
                            : Digits{};
  if (a.empty() && incl_a) return frac_le(b, incl_b, n);
  if (n == 0) return {};                              // F = "" is 0 < 0.a, or 0 with 0 excluded
  const char a0 = a.empty() ? '0' : a[0], b0 = b[0];  // b is not empty here
  const std::string_view ar = a.empty() ? a : a.substr(1), br = b.substr(1);
  if (a0 == b0)
    return digits_after(std::string(1, a0), frac_between(ar, br, incl_a, incl_b, n - 1));
  Digits out = digits_after(std::string(1, a0), frac_ge(ar, incl_a, n - 1));
  out = digits_union(out, digits_after(std::string(1, b0), frac_le(br, incl_b, n - 1)));
  if (a0 + 1 < b0)
    out = digits_union(
        out,
        {digit_class(static_cast<char>(a0 + 1), static_cast<char>(b0 - 1)) + up_to(n - 1), false});
  return out;
}

// Integer part `ip` then a fraction from `f` ("" = no fraction part).
Re with_fraction(const std::string& ip, const Digits& f) {
  if (!f.more && !f.empty) return std::nullopt;
  if (!f.more) return ip;
  return ip + group("\\." + group(*f.more)) + (f.empty ? "?" : "");
}

// Non-negative decimal strings (JSON's form without sign and exponent)
// whose value x has lo <= x <= hi (lo < x, x < hi per flags); hi nullopt:
// unbounded. lo, hi non-negative.
Re nonneg_decimal_range(const Decimal& lo, bool incl_lo, const std::optional<Decimal>& hi,
                        bool incl_hi, size_t n) {
  if (hi) {
    const int c = cmp_abs(lo, *hi);
    if (c > 0 || (c == 0 && !(incl_lo && incl_hi))) return std::nullopt;
  }
  std::vector<std::string> parts;
  auto add = [&](const Re& r) {
    if (r) parts.push_back(*r);
  };
  if (hi && lo.int_digits == hi->int_digits) {
    add(with_fraction(lo.int_digits,
                      frac_between(lo.frac_digits, hi->frac_digits, incl_lo, incl_hi, n)));
  } else {
    add(with_fraction(lo.int_digits, frac_ge(lo.frac_digits, incl_lo, n)));
    const std::string next = inc_int(lo.int_digits);
    if (!hi || cmp_int(next, hi->int_digits) < 0) {
      Re mid = int_digits_range(
          next, hi ? std::optional<std::string>(dec_int(hi->int_digits)) : std::nullopt);
      if (mid) parts.push_back(*mid + fmt::format("(?:\\.[0-9]{{1,{}}})?", n));
    }
    if (hi) add(with_fraction(hi->int_digits, frac_le(hi->frac_digits, incl_hi, n)));
  }
  if (parts.empty()) return std::nullopt;
  return parts.size() == 1 ? group(parts[0]) : alternation(parts);
}

// Decimal strings (JSON numbers without an exponent) with values in the
// bounds (either side may be absent; flags: inclusive).
Re decimal_range_regex(const std::optional<Decimal>& lo, bool incl_lo,
                       const std::optional<Decimal>& hi, bool incl_hi) {
  // Fraction digits, at most: kMaxFractionDigits, or more where a bound
  // has more (two past its last digit, so that an open range stays
  // non-empty).
  size_t n = kMaxFractionDigits;
  if (lo) n = std::max(n, lo->frac_digits.size() + 2);
  if (hi) n = std::max(n, hi->frac_digits.size() + 2);
  const Decimal zero;
  std::vector<std::string> parts;
  // x >= 0: [max(lo, 0), hi].
  if (!hi || !hi->neg) {
    const bool lo_pos = lo && !lo->neg;
    Re r = nonneg_decimal_range(lo_pos ? *lo : zero, lo_pos ? incl_lo : true, hi, incl_hi, n);
    if (r) parts.push_back(*r);
  }
  // x = -y, y >= 0: y in [max(-hi, 0), -lo] (so "-0" is in when 0 is).
  if (!lo || lo->neg || lo->is_zero()) {
    const bool hi_neg = hi && (hi->neg || hi->is_zero());
    Decimal ylo = hi_neg ? *hi : zero;
    ylo.neg = false;
    std::optional<Decimal> yhi;
    if (lo) {
      yhi = *lo;
      yhi->neg = false;
    }
    Re r = nonneg_decimal_range(ylo, hi_neg ? incl_hi : true, yhi, incl_lo, n);
    if (r) parts.push_back("-" + *r);
  }
  if (parts.empty()) return std::nullopt;
  return parts.size() == 1 ? parts[0] : alternation(parts);
}

// The top-level alternatives of a regex, as [begin, end) offsets: '|'
// outside groups, classes and escapes splits.
std::vector<std::pair<size_t, size_t>> top_level_branches(std::string_view p) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t start = 0;
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < p.size() && p[i + 1] == '^') ++i;
      if (i + 1 < p.size() && p[i + 1] == ']') ++i;  // a leading ']' is literal
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      out.emplace_back(start, i);
      start = i + 1;
    }
  }
  out.emplace_back(start, p.size());
  return out;
}

class Builder {
 public:
  Builder(const json& root, std::string ws, bool no_additional)
      : root_(root), ws_(std::move(ws)), no_additional_(no_additional) {}

  std::string top() {
    Re r = build(root_, 0, "#");
    if (!r)
      throw SchemaError(
          "the JSON schema can be satisfied by no document (within the $ref depth bound)");
    return *r;
  }

  std::string any_value(int depth) const {
    std::vector<std::string> parts = {string_re(0, -1), std::string(kNumber), "true", "false",
                                      "null"};
    if (depth > 0) {
      const std::string v = any_value(depth - 1);
      parts.push_back(object_of_any(v));
      parts.push_back("\\[" + ws_ + group(v + group(ws_ + "," + ws_ + v) + "*") + "?" + ws_ +
                      "\\]");
    }
    return alternation(parts);
  }

  std::string object_of_any(const std::string& value) const {
    const std::string member = string_re(0, -1) + ws_ + ":" + ws_ + value;
    return "\\{" + ws_ + group(member + group(ws_ + "," + ws_ + member) + "*") + "?" + ws_ + "\\}";
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw SchemaError(fmt::format("invalid or unsupported JSON schema at {}: {}", path, what));
  }

  std::string string_re(int min_len, int max_len) const {
    if (max_len < 0)
      return "\"" + std::string(kStringChar) + fmt::format("{{{},}}", min_len) + "\"";
    return "\"" + std::string(kStringChar) + fmt::format("{{{},{}}}", min_len, max_len) + "\"";
  }

  static std::string literal(const json& v) { return regex_escape(v.dump()); }

  const json& resolve(const std::string& ref, const std::string& path) const {
    if (ref == "#") return root_;
    if (!ref.starts_with("#/"))
      fail(path, fmt::format("$ref '{}' is not within the document", ref));
    const json* cur = &root_;
    size_t pos = 2;
    while (pos <= ref.size()) {
      size_t end = ref.find('/', pos);
      if (end == std::string::npos) end = ref.size();
      std::string key;  // JSON pointer unescaping: ~1 is '/', ~0 is '~'
      for (size_t i = pos; i < end; ++i) {
        if (ref[i] == '~' && i + 1 < end && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
          key.push_back(ref[i + 1] == '1' ? '/' : '~');
          ++i;
        } else {
          key.push_back(ref[i]);
        }
      }
      if (!cur->is_object() || !cur->contains(key))
        fail(path, fmt::format("$ref '{}' does not resolve", ref));
      cur = &(*cur)[key];
      pos = end + 1;
    }
    return *cur;
  }

  static long long clamp_bound(double v) {
    return static_cast<long long>(
        std::clamp(v, -static_cast<double>(kMaxBound), static_cast<double>(kMaxBound)));
  }

  // Integer bounds of a schema: [lo, hi] (either may be absent).
  void int_bounds(const json& s, const std::string& path, std::optional<long long>& lo,
                  std::optional<long long>& hi) const {
    auto num = [&](const char* k) -> std::optional<double> {
      if (!s.contains(k)) return std::nullopt;
      const json& v = s[k];
      if (v.is_boolean())
        fail(path, fmt::format("'{}' as a boolean (draft 4) is not supported", k));
      if (!v.is_number()) fail(path, fmt::format("'{}' must be a number", k));
      return v.get<double>();
    };
    if (auto v = num("minimum")) lo = clamp_bound(std::ceil(*v));
    if (auto v = num("exclusiveMinimum")) {
      long long x = clamp_bound(std::floor(*v)) + 1;
      lo = lo ? std::max(*lo, x) : x;
    }
    if (auto v = num("maximum")) hi = clamp_bound(std::floor(*v));
    if (auto v = num("exclusiveMaximum")) {
      long long x = clamp_bound(std::ceil(*v)) - 1;
      hi = hi ? std::min(*hi, x) : x;
    }
  }

  Re integer_re(const json& s, const std::string& path) const {
    std::optional<long long> lo, hi;
    int_bounds(s, path, lo, hi);
    if (lo && hi) {
      if (*lo > *hi) return std::nullopt;
      return integer_range_regex(*lo, *hi);
    }
    if (lo) {  // x >= lo
      if (*lo == 0) return std::string("(?:0|[1-9][0-9]*)");
      if (*lo < 0) return alternation({integer_range_regex(*lo, -1), "0", "[1-9][0-9]*"});
      const std::string s_lo = std::to_string(*lo);
      return alternation({nonneg_range(static_cast<unsigned long long>(*lo),
                                       std::stoull(std::string(s_lo.size(), '9'))),
                          fmt::format("[1-9][0-9]{{{},}}", s_lo.size())});
    }
    if (hi) {  // x <= hi
      if (*hi >= 0) return alternation({integer_range_regex(0, *hi), "-[1-9][0-9]*"});
      const std::string s_hi = std::to_string(-*hi);
      return fmt::format("-{}",
                         alternation({nonneg_range(static_cast<unsigned long long>(-*hi),
                                                   std::stoull(std::string(s_hi.size(), '9'))),
                                      fmt::format("[1-9][0-9]{{{},}}", s_hi.size())}));
    }
    return std::string(kInteger);
  }

  // Bounded numbers: exactly the decimal strings whose value is within the
  // bounds (decimal_range_regex; fractional and exclusive bounds are exact).
  // No exponent then ("1e-1" is never written): an exponent's value cannot
  // be bounded digit by digit; at most kMaxFractionDigits fraction digits
  // (or two more than a bound has). Unbounded: any JSON number, as before.
  Re number_re(const json& s, const std::string& path) const {
    std::optional<Decimal> lo, hi;
    bool incl_lo = true, incl_hi = true;
    auto bound = [&](const char* k, bool lower, bool inclusive) {
      if (!s.contains(k)) return;
      const json& v = s[k];
      if (v.is_boolean())
        fail(path, fmt::format("'{}' as a boolean (draft 4) is not supported", k));
      if (!v.is_number()) fail(path, fmt::format("'{}' must be a number", k));
      const Decimal d = parse_decimal(v.dump());
      if (d.int_digits.size() > kMaxBoundDigits || d.frac_digits.size() > kMaxBoundDigits)
        fail(path, fmt::format("'{}' has more than {} digits before or after the point: not "
                               "supported",
                               k, kMaxBoundDigits));
      std::optional<Decimal>& b = lower ? lo : hi;
      bool& incl = lower ? incl_lo : incl_hi;
      if (!b) {
        b = d;
        incl = inclusive;
        return;
      }
      const int c = cmp_decimal(d, *b);
      if (lower ? c > 0 : c < 0) {  // the tighter bound wins
        b = d;
        incl = inclusive;
      } else if (c == 0) {
        incl = incl && inclusive;
      }
    };
    bound("minimum", true, true);
    bound("exclusiveMinimum", true, false);
    bound("maximum", false, true);
    bound("exclusiveMaximum", false, false);
    if (!lo && !hi) return std::string(kNumber);
    return decimal_range_regex(lo, incl_lo, hi, incl_hi);
  }

  // A JSON-schema `pattern` as the regex of a whole string's content.
  // JSON Schema patterns are unanchored (ECMA-262 search semantics, as
  // vLLM's backends read them): "^abc" means "starts with abc", "xyz$" "ends
  // with xyz", "abc" "contains abc". Each top-level alternative keeps its
  // own anchors ("^a|b$"); an unanchored side gets any string characters.
  // Errors name offsets in the pattern as the schema wrote it.
  std::string pattern_body(const std::string& p, const std::string& path) const {
    const std::string any = group(std::string(kStringChar)) + "*";
    std::vector<std::string> branches;
    for (auto [begin, end] : top_level_branches(p)) {
      std::string_view b(p.data() + begin, end - begin);
      const bool head = b.starts_with('^');
      if (head) b.remove_prefix(1);
      size_t slashes = 0;  // a '$' after an odd number of backslashes is a literal
      while (b.size() >= 2 + slashes && b[b.size() - 2 - slashes] == '\\') ++slashes;
      const bool tail = b.ends_with('$') && slashes % 2 == 0;
      if (tail) b.remove_suffix(1);
      ByteDfa d;
      try {
        d = ByteDfa::compile(b);
      } catch (const RegexError& e) {
        if (e.offset() == std::string::npos) fail(path, fmt::format("'pattern': {}", e.what()));
        fail(path, fmt::format("'pattern': invalid regex at offset {}: {}",
                               begin + (head ? 1 : 0) + e.offset(), e.detail()));
      }
      for (int c = 0; c < 0x20; ++c)
        if (d.uses_byte(static_cast<uint8_t>(c)))
          fail(path,
               "'pattern' may match control characters (JSON needs them escaped): not supported");
      if (d.uses_byte('"') || d.uses_byte('\\'))
        fail(path, "'pattern' may match '\"' or '\\' (JSON needs them escaped): not supported");
      branches.push_back((head ? "" : any) + group(std::string(b)) + (tail ? "" : any));
    }
    return branches.size() == 1 ? branches[0] : alternation(branches);
  }

  Re string_schema(const json& s, const std::string& path) const {
    auto get_len = [&](const char* k, int def) {
      if (!s.contains(k)) return def;
      if (!s[k].is_number_integer() || s[k].get<long long>() < 0)
        fail(path, fmt::format("'{}' must be a non-negative integer", k));
      long long v = s[k].get<long long>();
      if (v > kMaxRepeat) fail(path, fmt::format("'{}' above {} is not supported", k, kMaxRepeat));
      return static_cast<int>(v);
    };
    const int min_len = get_len("minLength", 0), max_len = get_len("maxLength", -1);
    if (max_len >= 0 && max_len < min_len) return std::nullopt;
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (has_len) fail(path, "'pattern' together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
      return "\"" + group(pattern_body(s["pattern"].get<std::string>(), path)) + "\"";
    }
    if (s.contains("format")) {
      if (has_len) fail(path, "'format' together with minLength/maxLength is not supported");
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      const std::string date = "[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])";
      const std::string time =
          "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]"
          "):[0-5][0-9])";
      if (f == "date") return "\"" + date + "\"";
      if (f == "time") return "\"" + time + "\"";
      if (f == "date-time") return "\"" + date + "T" + time + "\"";
      if (f == "uuid") return "\"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\"";
      fail(path,
           fmt::format("string format '{}' is not supported (date, time, date-time, uuid)", f));
    }
    return string_re(min_len, max_len);
  }

  Re array_schema(const json& s, int depth, const std::string& path) {
    auto get_count = [&](const char* k, int def) {
      if (!s.contains(k)) return def;
      if (!s[k].is_number_integer() || s[k].get<long long>() < 0)
        fail(path, fmt::format("'{}' must be a non-negative integer", k));
      return static_cast<int>(std::min<long long>(s[k].get<long long>(), kMaxRepeat));
    };
    const int min_items = get_count("minItems", 0), max_items = get_count("maxItems", -1);
    if (max_items >= 0 && max_items < min_items) return std::nullopt;
    if (s.contains("uniqueItems") && s["uniqueItems"] == true)
      fail(path, "'uniqueItems' is not supported");
    const std::string sep = ws_ + "," + ws_;
    if (s.contains("prefixItems")) {
      const json& pi = s["prefixItems"];
      if (!pi.is_array()) fail(path, "'prefixItems' must be an array");
      const int n = static_cast<int>(pi.size());
      if (n < min_items || (max_items >= 0 && n > max_items))
        fail(path, "'prefixItems' with minItems/maxItems other than its length is not supported");
      std::string body;
      for (size_t i = 0; i < pi.size(); ++i) {
        Re item = build(pi[i], depth, fmt::format("{}/prefixItems/{}", path, i));
        if (!item) return std::nullopt;
        body += (i ? sep : "") + *item;
      }
      return "\\[" + ws_ + body + ws_ + "\\]";
    }
    std::string item;
    if (!s.contains("items") || s["items"] == true) {
      item = any_value(kAnyJsonDepth - 1);
    } else if (s["items"] == false) {
      if (min_items > 0) return std::nullopt;
      return "\\[" + ws_ + "\\]";
    } else {
      Re r = build(s["items"], depth, path + "/items");
      if (!r) {
        if (min_items > 0) return std::nullopt;
        return "\\[" + ws_ + "\\]";
      }
      item = *r;
    }
    if (max_items == 0) return "\\[" + ws_ + "\\]";
    const std::string more = group(sep + item);
    std::string body;
    if (min_items == 0) {
      body = group(item +
                   (max_items < 0 ? more + "*" : fmt::format("{}{{0,{}}}", more, max_items - 1))) +
             "?";
    } else {
      body =
          item + (max_items < 0 ? fmt::format("{}{{{},}}", more, min_items - 1)
                                : fmt::format("{}{{{},{}}}", more, min_items - 1, max_items - 1));
    }
    return "\\[" + ws_ + body + ws_ + "\\]";
  }

  Re object_schema(const json& s, int depth, const std::string& path) {
    for (const char* k : {"minProperties", "maxProperties", "patternProperties", "propertyNames",
                          "dependentRequired", "dependentSchemas", "unevaluatedProperties"})
      if (s.contains(k)) fail(path, fmt::format("'{}' is not supported", k));
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "'required' must be an array of strings");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "'required' must be an array of strings");
        required.push_back(r.get<std::string>());
      }
    }
    const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) fail(path, "'properties' must be an object");
    // A required property `properties` does not list is an additional one:
    // its value follows additionalProperties, and where those are closed
    // (false, explicitly) no document has it, so none satisfies the schema
    // (a 400 at the top, a dropped branch in anyOf). Closed only by
    // disable_additional_properties (absent additionalProperties, as for
    // tools' parameters), it stays allowed with any value: that option
    // keeps the model from adding keys, not a schema's own required ones.
    for (const auto& r : required) {
      if (props.contains(r)) continue;
      if (ap && *ap == false) return std::nullopt;
      props[r] = ap && ap->is_object() ? *ap : json::object();
    }
    if (props.empty()) {
      const bool closed = (ap && *ap == false) || (!ap && no_additional_);
      if (closed) return "\\{" + ws_ + "\\}";
      std::string value;
      if (!ap || *ap == true) {
        value = any_value(kAnyJsonDepth - 1);
      } else {
        Re v = build(*ap, depth, path + "/additionalProperties");
        if (!v) return "\\{" + ws_ + "\\}";
        value = *v;
      }
      return object_of_any(value);
    }
    struct Prop {
      std::string re;
      bool required;
    };
    std::vector<Prop> list;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
      Re v = build(it.value(), depth, path + "/properties/" + it.key());
      if (!v) {
        if (req) return std::nullopt;
        continue;
      }
      list.push_back({regex_escape(json(it.key()).dump()) + ws_ + ":" + ws_ + *v, req});
    }
    const std::string sep = ws_ + "," + ws_;
    // rest[i]: properties i.. after something was emitted.
    std::vector<std::string> rest(list.size() + 1);
    for (size_t i = list.size(); i-- > 0;) {
      std::string one = group(sep + list[i].re);
      rest[i] = (list[i].required ? one : one + "?") + rest[i + 1];
    }
    std::vector<std::string> firsts;
    bool has_required = false;
    for (size_t k = 0; k < list.size(); ++k) {
      firsts.push_back(list[k].re + rest[k + 1]);
      if (list[k].required) {
        has_required = true;
        break;
      }
    }
    std::string body = firsts.empty() ? "" : alternation(firsts);
    if (!has_required && !body.empty()) body += "?";
    return "\\{" + ws_ + body + ws_ + "\\}";
  }

  Re typed(const json& s, const std::string& type, int depth, const std::string& path) {
    if (type == "string") return string_schema(s, path);
    if (type == "integer") return integer_re(s, path);
    if (type == "number") return number_re(s, path);
    if (type == "boolean") return std::string("(?:true|false)");
    if (type == "null") return std::string("null");
    if (type == "array") return array_schema(s, depth, path);
    if (type == "object") return object_schema(s, depth, path);
    fail(path, fmt::format("unknown type '{}'", type));
  }

  Re alternatives(const json& list, int depth, const std::string& path, const char* key) {
    if (!list.is_array() || list.empty())
      fail(path, fmt::format("'{}' must be a non-empty array", key));
    std::vector<std::string> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      Re r = build(list[i], depth, fmt::format("{}/{}/{}", path, key, i));
      if (r) parts.push_back(*r);
    }
    if (parts.empty()) return std::nullopt;
    return alternation(parts);
  }

  // build_one with a bound on the pattern's size: nested optional
  // properties repeat their sub-patterns, so a deep schema could otherwise
  // grow a pattern exponentially before the automaton limits see it.
  Re build(const json& s, int depth, const std::string& path) {
    Re r = build_one(s, depth, path);
    if (r && r->size() > kMaxPatternBytes)
      fail(path, fmt::format("the schema is too complex (its pattern exceeds {} bytes)",
                             kMaxPatternBytes));
    return r;
  }

  Re build_one(const json& s, int depth, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return std::nullopt;
      return any_value(kAnyJsonDepth);
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    static const std::set<std::string> kKnown = {"type",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "prefixItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "uniqueItems",
                                                 "enum",
                                                 "const",
                                                 "minLength",
                                                 "maxLength",
                                                 "pattern",
                                                 "format",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "$ref",
                                                 "$defs",
                                                 "definitions",
                                                 "title",
                                                 "description",
                                                 "default",
                                                 "examples",
                                                 "$schema",
                                                 "$id",
                                                 "$comment",
                                                 "deprecated",
                                                 "readOnly",
                                                 "writeOnly",
                                                 "minProperties",
                                                 "maxProperties",
                                                 "patternProperties",
                                                 "propertyNames",
                                                 "dependentRequired",
                                                 "dependentSchemas",
                                                 "unevaluatedProperties"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kKnown.count(it.key()))
        fail(path, fmt::format("keyword '{}' is not supported", it.key()));
    for (const char* k : {"not", "if", "then", "else", "contains", "multipleOf"})
      if (s.contains(k)) fail(path, fmt::format("keyword '{}' is not supported", k));
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
      for (auto it = s.begin(); it != s.end(); ++it) {
        static const std::set<std::string> kBeside = {
            "$ref",    "$defs",    "definitions", "title", "description",
            "default", "examples", "$schema",     "$id",   "$comment"};
        if (!kBeside.count(it.key()))
          fail(path, fmt::format("keyword '{}' beside '$ref' is not supported", it.key()));
      }
      if (depth >= kMaxRefDepth) return std::nullopt;
      const std::string ref = s["$ref"].get<std::string>();
      return build(resolve(ref, path), depth + 1, ref);
    }
    if (s.contains("const")) return literal(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        fail(path, "'enum' must be a non-empty array");
      std::vector<std::string> parts;
      for (const auto& v : s["enum"]) parts.push_back(literal(v));
      return alternation(parts);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1)
        fail(path, "'allOf' with more than one schema is not supported");
      return build(s["allOf"][0], depth, path + "/allOf/0");
    }
    if (s.contains("anyOf")) return alternatives(s["anyOf"], depth, path, "anyOf");
    if (s.contains("oneOf")) return alternatives(s["oneOf"], depth, path, "oneOf");
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        return object_schema(s, depth, path);
      if (s.contains("items") || s.contains("prefixItems")) return array_schema(s, depth, path);
      return any_value(kAnyJsonDepth);
    }
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), depth, path);
    if (!t.is_array() || t.empty()) fail(path, "'type' must be a string or a non-empty array");
    std::vector<std::string> parts;
    for (const auto& one : t) {
      if (!one.is_string()) fail(path, "'type' entries must be strings");
      Re r = typed(s, one.get<std::string>(), depth, path);
      if (r) parts.push_back(*r);
    }
    if (parts.empty()) return std::nullopt;
    return alternation(parts);
  }

  const json& root_;
  std::string ws_;
  bool no_additional_;
};

// The separator between JSON tokens: the pattern as one group, or nothing
// for "" (no whitespace allowed).
std::string whitespace_group(std::string_view ws) {
  if (ws.empty()) return "";
  std::string w(ws);
  try {
    (void)ByteDfa::compile(w);
  } catch (const RegexError& e) {
    throw SchemaError(fmt::format("guided_whitespace_pattern: {}", e.what()));
  }
  return group(w);
}

}  // namespace

std::string integer_range_regex(long long lo, long long hi) {
  if (lo > hi) throw SchemaError("integer_range_regex: empty range");
  std::vector<std::string> parts;
  if (lo < 0) {
    const unsigned long long a = hi < 0 ? static_cast<unsigned long long>(-hi) : 1ULL;
    parts.push_back(fmt::format("-{}", nonneg_range(a, static_cast<unsigned long long>(-lo))));
  }
  if (hi >= 0)
    parts.push_back(nonneg_range(static_cast<unsigned long long>(std::max(lo, 0LL)),
                                 static_cast<unsigned long long>(hi)));
  return parts.size() == 1 ? group(parts[0]) : alternation(parts);
}

std::string json_schema_to_regex(std::string_view schema_text, std::string_view whitespace_pattern,
                                 bool disable_additional_properties) {
  json schema = json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) throw SchemaError("the JSON schema is not valid JSON");
  Builder b(schema, whitespace_group(whitespace_pattern), disable_additional_properties);
  return b.top();
}

std::string json_object_regex(std::string_view whitespace_pattern) {
  json empty = json::object();
  Builder b(empty, whitespace_group(whitespace_pattern), false);
  return b.object_of_any(b.any_value(kAnyJsonDepth));
}

}  // namespace pagoda::guided
