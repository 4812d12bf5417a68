#include "engine/guided/ebnf_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "engine/core/utf8.h"
#include "engine/guided/utf8_ranges.h"

namespace pagoda::guided {
namespace {

using Range = std::pair<uint32_t, uint32_t>;  // code points, inclusive

struct Expr {
  enum Kind { kSeq, kAlt, kLit, kClass, kRef, kRepeat } kind = kSeq;
  std::vector<Expr> kids;
  std::string bytes;          // kLit: UTF-8
  std::vector<Range> ranges;  // kClass: sorted, disjoint, no surrogates
  std::string name;           // kRef
  size_t pos = 0;             // kRef: offset in the text, for messages
  int64_t min = 0, max = -1;  // kRepeat: max -1 = unbounded
};

struct RuleDef {
  std::string name;
  size_t pos = 0;
  Expr body;
};

bool is_name_char(char c, bool first) {
  return c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && c >= '0' && c <= '9');
}

// Recursive-descent parser over the text (grammar in the header).
class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  std::vector<RuleDef> parse() {
    std::vector<RuleDef> rules;
    skip_space();
    while (i_ < t_.size()) {
      RuleDef r;
      r.pos = i_;
      r.name = name();
      if (r.name.empty()) fail(i_, "expected a rule name");
      skip_space();
      if (t_.substr(i_, 3) != "::=")
        fail(i_, fmt::format("expected '::=' after rule name '{}'", r.name));
      i_ += 3;
      r.body = choices(0);
      rules.push_back(std::move(r));
      skip_space();
    }
    return rules;
  }

  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < pos && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(fmt::format("grammar error at line {}, column {}: {}", line, col, msg));
  }

 private:
  static constexpr int kMaxNesting = 200;

  char peek(size_t d = 0) const { return i_ + d < t_.size() ? t_[i_ + d] : '\0'; }

  void skip_space() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string name() {
    const size_t start = i_;
    while (i_ < t_.size() && is_name_char(t_[i_], i_ == start)) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  // True when a rule definition (NAME "::=") starts at the current offset.
  bool at_rule_start() const {
    size_t k = i_;
    if (k >= t_.size() || !is_name_char(t_[k], true)) return false;
    while (k < t_.size() && is_name_char(t_[k], k == i_)) ++k;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  Expr choices(int depth) {
    if (depth > kMaxNesting) fail(i_, "groups are nested too deeply");
    Expr alt;
    alt.kind = Expr::kAlt;
    alt.kids.push_back(sequence(depth));
    while (true) {
      skip_space();
      if (peek() != '|') break;
      ++i_;
      alt.kids.push_back(sequence(depth));
    }
    return alt;
  }

  Expr sequence(int depth) {
    Expr seq;
    seq.kind = Expr::kSeq;
    while (true) {
      skip_space();
      const char c = peek();
      if (c == '\0' || c == '|' || c == ')' || at_rule_start()) break;
      seq.kids.push_back(quantified(element(depth)));
    }
    if (seq.kids.empty()) fail(i_, "expected an element (a string, class, rule name or group)");
    return seq;
  }

  Expr element(int depth) {
    const char c = peek();
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '(') {
      if (peek(1) == '=') fail(i_, "lookahead assertions '(= ...)' are not supported");
      const size_t open = i_;
      ++i_;
      skip_space();
      if (peek() == ')') {  // "()": the empty string
        ++i_;
        Expr e;
        e.kind = Expr::kLit;
        return e;
      }
      Expr e = choices(depth + 1);
      skip_space();
      if (peek() != ')') fail(peek() ? i_ : open, "expected ')' to close the group");
      ++i_;
      return e;
    }
    if (c == '\'') fail(i_, "strings are written in double quotes (\"...\")");
    if (is_name_char(c, true)) {
      Expr e;
      e.kind = Expr::kRef;
      e.pos = i_;
      e.name = name();
      // xgrammar's macros (a name it reserves, then arguments).
      static constexpr std::string_view kMacros[] = {"TagDispatch", "Token", "ExcludeToken",
                                                     "TokenTagDispatch", "Regex"};
      for (std::string_view m : kMacros)
        if (e.name == m)
          fail(e.pos, fmt::format("xgrammar macros such as '{}(...)' are not supported", e.name));
      return e;
    }
    if (c == ':' || (c == '-' && peek(1) == '>'))
      fail(i_, "unexpected ':'; rules are written 'name ::= ...' (Lark syntax is not supported)");
    fail(i_, fmt::format("unexpected character '{}'", c));
  }

  Expr quantified(Expr e) {
    // A quantifier follows its element directly (spaces allowed).
    skip_space();
    const char c = peek();
    Expr r;
    r.kind = Expr::kRepeat;
    if (c == '*') {
      r.min = 0, r.max = -1;
    } else if (c == '+') {
      r.min = 1, r.max = -1;
    } else if (c == '?') {
      r.min = 0, r.max = 1;
    } else if (c == '{') {
      const size_t open = i_;
      ++i_;
      r.min = integer(open);
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
        r.max = peek() == '}' ? -1 : integer(open);
      } else {
        r.max = r.min;
      }
      skip_space();
      if (peek() != '}') fail(i_, "expected '}' to close the repetition range");
      if (r.max >= 0 && r.max < r.min)
        fail(open,
             fmt::format("repetition range {{{},{}}}: the lower bound is larger than the upper",
                         r.min, r.max));
      if (r.min > kMaxGrammarRepeat || r.max > kMaxGrammarRepeat)
        fail(open, fmt::format("repetition bounds above {} are not supported", kMaxGrammarRepeat));
    } else {
      return e;
    }
    ++i_;
    r.kids.push_back(std::move(e));
    skip_space();
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
      fail(i_, "a quantifier cannot follow another; group the element first");
    return r;
  }

  int64_t integer(size_t open) {
    skip_space();
    const size_t start = i_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxGrammarRepeat)
        fail(open, fmt::format("repetition bounds above {} are not supported", kMaxGrammarRepeat));
      ++i_;
    }
    if (i_ == start) fail(i_, "expected a non-negative integer in the repetition range");
    return v;
  }

  uint32_t hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail(i_, fmt::format("expected {} hex digits in the escape", n));
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  // One character (escape or UTF-8 sequence) at i_ as a code point.
  uint32_t character(bool in_class) {
    const size_t start = i_;
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++i_;
      const char e = peek();
      ++i_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case 'a':
          return 0x07;
        case 'b':
          return 0x08;
        case 'e':
          return 0x1B;
        case 'f':
          return 0x0C;
        case 'v':
          return 0x0B;
        case '0':
          return 0;
        case '"':
        case '\'':
        case '?':
        case '\\':
          return static_cast<uint32_t>(e);
        case 'x':
          return hex(2);
        case 'u':
          return check_cp(hex(4), start);
        case 'U':
          return check_cp(hex(8), start);
        default:
          break;
      }
      if (in_class) {
        static constexpr std::string_view kClassEscapes = "^$.*+()[]{}|/-";
        if (e != '\0' && kClassEscapes.find(e) != std::string_view::npos)
          return static_cast<uint32_t>(e);
        if (e == 'd' || e == 'D' || e == 's' || e == 'S' || e == 'w' || e == 'W')
          fail(start, fmt::format("class escape '\\{}' is not supported; write the range", e));
      }
      fail(start, e ? fmt::format("invalid escape '\\{}'", e) : "unterminated escape");
    }
    // A UTF-8 sequence.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + static_cast<size_t>(len) > t_.size()) fail(i_, "invalid UTF-8");
    uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(t_[i_ + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) fail(i_, "invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    i_ += static_cast<size_t>(len);
    return check_cp(cp, start);
  }

  uint32_t check_cp(uint32_t cp, size_t pos) const {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail(pos, fmt::format("U+{:04X} is not a Unicode scalar value", cp));
    return cp;
  }

  Expr literal() {
    const size_t open = i_;
    ++i_;
    Expr e;
    e.kind = Expr::kLit;
    while (true) {
      const char c = peek();
      if (c == '\0' || c == '\n' || c == '\r') fail(open, "unterminated string");
      if (c == '"') break;
      append_utf8(e.bytes, character(false));
    }
    ++i_;
    return e;
  }

  Expr char_class() {
    const size_t open = i_;
    ++i_;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++i_;
    }
    std::vector<Range> ranges;
    while (true) {
      const char c = peek();
      if (c == '\0') fail(open, "unterminated character class");
      if (c == '\n' || c == '\r') fail(i_, "a character class cannot contain a newline");
      if (c == ']') break;
      const size_t at = i_;
      const uint32_t lo = c == '-' ? (++i_, '-') : character(true);
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++i_;
        const uint32_t hi = peek() == '-' ? (++i_, '-') : character(true);
        if (hi < lo) fail(at, "character class range is reversed (lower bound above upper)");
        ranges.emplace_back(lo, hi);
      } else {
        ranges.emplace_back(lo, lo);
      }
    }
    ++i_;
    Expr e;
    e.kind = Expr::kClass;
    e.ranges = normalize(std::move(ranges), negated);
    return e;
  }

  // Sorted, merged, without surrogates; complemented when negated.
  static std::vector<Range> normalize(std::vector<Range> in, bool negated) {
    std::sort(in.begin(), in.end());
    std::vector<Range> merged;
    for (const auto& r : in) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    if (negated) {
      std::vector<Range> comp;
      uint32_t next = 0;
      for (const auto& r : merged) {
        if (r.first > next) comp.emplace_back(next, r.first - 1);
        next = r.second + 1;
      }
      if (next <= 0x10FFFF) comp.emplace_back(next, 0x10FFFF);
      merged = std::move(comp);
    }
    std::vector<Range> out;
    for (const auto& r : merged) {  // cut out U+D800..U+DFFF
      if (r.second < 0xD800 || r.first > 0xDFFF) {
        out.push_back(r);
        continue;
      }
      if (r.first < 0xD800) out.emplace_back(r.first, 0xD7FF);
      if (r.second > 0xDFFF) out.emplace_back(0xE000, r.second);
    }
    return out;
  }

  std::string_view t_;
  size_t i_ = 0;
};

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s{};
  for (int b = lo; b <= hi; ++b) s[static_cast<size_t>(b) >> 6] |= uint64_t{1} << (b & 63);
  return s;
}

// EBNF rules -> BnfGrammar (helper rules for groups, classes, quantifiers).
class Lowerer {
 public:
  Lowerer(const Parser& p, const std::vector<RuleDef>& defs) : p_(p) {
    for (const auto& d : defs) {
      if (index_.count(d.name)) p_.fail(d.pos, fmt::format("rule '{}' is defined twice", d.name));
      index_[d.name] = static_cast<int32_t>(g_.rules.size());
      g_.rules.push_back({d.name, {}});
      origin_.push_back(d.name);
    }
    for (const auto& d : defs) {
      const int32_t r = index_[d.name];
      add_alts(r, d.body);
    }
    auto root = index_.find("root");
    if (root == index_.end()) throw GrammarError("grammar has no 'root' rule (the start rule)");
    g_.root = root->second;
  }

  BnfGrammar take() { return std::move(g_); }
  const std::vector<std::string>& origin() const { return origin_; }

 private:
  void add_alts(int32_t r, const Expr& e) {
    if (e.kind == Expr::kAlt) {
      for (const auto& k : e.kids) add_alts(r, k);
      return;
    }
    std::vector<BnfSymbol> seq;
    lower(e, seq, r);
    g_.rules[static_cast<size_t>(r)].alts.push_back(std::move(seq));
  }

  int32_t new_rule(int32_t parent) {
    const std::string& base = origin_[static_cast<size_t>(parent)];
    g_.rules.push_back({fmt::format("{}#{}", base, g_.rules.size()), {}});
    origin_.push_back(base);
    return static_cast<int32_t>(g_.rules.size() - 1);
  }

  int32_t byteset(const ByteSet& s) {
    auto [it, fresh] = sets_.emplace(s, static_cast<int32_t>(g_.bytesets.size()));
    if (fresh) g_.bytesets.push_back(s);
    return it->second;
  }

  void push(std::vector<BnfSymbol>& seq, BnfSymbol s) {
    if (++symbols_ > kMaxGrammarSymbols)
      throw GrammarError(fmt::format("grammar is too large (over {} symbols after expansion)",
                                     kMaxGrammarSymbols));
    seq.push_back(s);
  }

  // `e` as one symbol (a helper rule when it is not one already).
  BnfSymbol single(const Expr& e, int32_t cur) {
    std::vector<BnfSymbol> seq;
    lower(e, seq, cur);
    if (seq.size() == 1) return seq[0];
    const int32_t r = new_rule(cur);
    g_.rules[static_cast<size_t>(r)].alts.push_back(std::move(seq));
    return {r, -1};
  }

  void lower(const Expr& e, std::vector<BnfSymbol>& seq, int32_t cur) {
    switch (e.kind) {
      case Expr::kLit:
        for (char c : e.bytes) {
          const auto b = static_cast<uint8_t>(c);
          push(seq, {-1, byteset(byte_range(b, b))});
        }
        return;
      case Expr::kRef: {
        auto it = index_.find(e.name);
        if (it == index_.end()) p_.fail(e.pos, fmt::format("rule '{}' is not defined", e.name));
        push(seq, {it->second, -1});
        return;
      }
      case Expr::kSeq:
        for (const auto& k : e.kids) lower(k, seq, cur);
        return;
      case Expr::kAlt: {
        if (e.kids.size() == 1) return lower(e.kids[0], seq, cur);
        const int32_t r = new_rule(cur);
        add_alts(r, e);
        push(seq, {r, -1});
        return;
      }
      case Expr::kClass:
        return lower_class(e, seq, cur);
      case Expr::kRepeat:
        return lower_repeat(e, seq, cur);
    }
  }

  void lower_class(const Expr& e, std::vector<BnfSymbol>& seq, int32_t cur) {
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (const auto& r : e.ranges) utf8_sequences(r.first, r.second, seqs);
    ByteSet single{};
    bool any_single = false;
    std::vector<std::vector<BnfSymbol>> alts;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        const ByteSet b = byte_range(s[0].first, s[0].second);
        for (size_t w = 0; w < 4; ++w) single[w] |= b[w];
        any_single = true;
        continue;
      }
      std::vector<BnfSymbol> alt;
      for (const auto& [lo, hi] : s) push(alt, {-1, byteset(byte_range(lo, hi))});
      alts.push_back(std::move(alt));
    }
    if (any_single && alts.empty()) return push(seq, {-1, byteset(single)});
    if (any_single) alts.push_back({BnfSymbol{-1, byteset(single)}});
    // Several sequences (or none: a class that matches nothing, a rule
    // without alternatives, removed later as unproductive).
    const int32_t r = new_rule(cur);
    g_.rules[static_cast<size_t>(r)].alts = std::move(alts);
    push(seq, {r, -1});
  }

  void lower_repeat(const Expr& e, std::vector<BnfSymbol>& seq, int32_t cur) {
    const BnfSymbol x = single(e.kids[0], cur);
    for (int64_t k = 0; k < e.min; ++k) push(seq, x);
    if (e.max < 0) {  // x*: R ::= x R | ""
      const int32_t r = new_rule(cur);
      std::vector<BnfSymbol> loop;
      push(loop, x);
      push(loop, {r, -1});
      g_.rules[static_cast<size_t>(r)].alts = {std::move(loop), {}};
      push(seq, {r, -1});
      return;
    }
    // (max - min) nested optionals: R1 ::= x | ""; Rj ::= x R(j-1) | "".
    int32_t inner = -1;
    for (int64_t k = 0; k < e.max - e.min; ++k) {
      const int32_t r = new_rule(cur);
      std::vector<BnfSymbol> alt;
      push(alt, x);
      if (inner >= 0) push(alt, {inner, -1});
      g_.rules[static_cast<size_t>(r)].alts = {std::move(alt), {}};
      inner = r;
    }
    if (inner >= 0) push(seq, {inner, -1});
  }

  const Parser& p_;
  BnfGrammar g_;
  std::map<std::string, int32_t> index_;
  std::vector<std::string> origin_;  // per rule: the user's rule it came from
  std::map<ByteSet, int32_t> sets_;
  size_t symbols_ = 0;
};

bool empty_set(const ByteSet& s) { return (s[0] | s[1] | s[2] | s[3]) == 0; }

// Removes alternatives that cannot derive a string; throws when root cannot.
void prune_unproductive(BnfGrammar& g) {
  std::vector<char> productive(g.rules.size(), 0);
  auto sym_ok = [&](const BnfSymbol& s) {
    return s.rule >= 0 ? productive[static_cast<size_t>(s.rule)] != 0
                       : !empty_set(g.bytesets[static_cast<size_t>(s.byteset)]);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& alt : g.rules[r].alts)
        if (std::all_of(alt.begin(), alt.end(), sym_ok)) {
          productive[r] = 1;
          changed = true;
          break;
        }
    }
  }
  if (!productive[static_cast<size_t>(g.root)])
    throw GrammarError("grammar accepts no string: rule 'root' can never complete");
  for (auto& rule : g.rules) {
    auto& alts = rule.alts;
    alts.erase(std::remove_if(alts.begin(), alts.end(),
                              [&](const std::vector<BnfSymbol>& alt) {
                                return !std::all_of(alt.begin(), alt.end(), sym_ok);
                              }),
               alts.end());
  }
}

// Throws naming a rule that can derive itself at its start through a
// call that leaves a return address (a non-tail position): the parser
// would push forever. Cycles through tail positions only (x* with a
// nullable x: R ::= x R | "") are fine: the closure meets the same item
// with the same stack again and stops.
void reject_left_recursion(const BnfGrammar& g, const std::vector<std::string>& origin) {
  const size_t n = g.rules.size();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : g.rules[r].alts)
        if (std::all_of(alt.begin(), alt.end(), [&](const BnfSymbol& s) {
              return s.rule >= 0 && nullable[static_cast<size_t>(s.rule)];
            })) {
          nullable[r] = 1;
          changed = true;
          break;
        }
    }
  }
  struct Edge {
    int32_t to;
    bool push;  // not in tail position: the call leaves a return address
  };
  std::vector<std::vector<Edge>> left(n);  // rules that can start rule r
  std::vector<std::vector<int32_t>> back(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : g.rules[r].alts)
      for (size_t k = 0; k < alt.size(); ++k) {
        const BnfSymbol& s = alt[k];
        if (s.rule < 0) break;
        left[r].push_back({s.rule, k + 1 < alt.size()});
        back[static_cast<size_t>(s.rule)].push_back(static_cast<int32_t>(r));
        if (!nullable[static_cast<size_t>(s.rule)]) break;
      }
  // Strongly connected components (Kosaraju, iterative).
  std::vector<int32_t> order;
  std::vector<char> seen(n, 0);
  for (size_t r0 = 0; r0 < n; ++r0) {
    if (seen[r0]) continue;
    std::vector<std::pair<int32_t, size_t>> st{{static_cast<int32_t>(r0), 0}};
    seen[r0] = 1;
    while (!st.empty()) {
      auto& [r, k] = st.back();
      const auto& out = left[static_cast<size_t>(r)];
      if (k == out.size()) {
        order.push_back(r);
        st.pop_back();
        continue;
      }
      const int32_t t = out[k++].to;
      if (!seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = 1;
        st.emplace_back(t, 0);
      }
    }
  }
  std::vector<int32_t> comp(n, -1);
  int32_t ncomp = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (comp[static_cast<size_t>(*it)] >= 0) continue;
    std::vector<int32_t> st{*it};
    comp[static_cast<size_t>(*it)] = ncomp;
    while (!st.empty()) {
      const int32_t r = st.back();
      st.pop_back();
      for (int32_t q : back[static_cast<size_t>(r)])
        if (comp[static_cast<size_t>(q)] < 0) {
          comp[static_cast<size_t>(q)] = ncomp;
          st.push_back(q);
        }
    }
    ++ncomp;
  }
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : left[r])
      if (e.push && comp[static_cast<size_t>(e.to)] == comp[r])
        throw GrammarError(fmt::format(
            "rule '{}' is left-recursive (it can derive itself before consuming any text), which "
            "is not supported; rewrite it with repetition, e.g. 'a ::= b (\"+\" b)*'",
            origin[static_cast<size_t>(e.to)]));
}

}  // namespace

bool looks_like_lark(std::string_view text) {
  if (text.find("::=") != std::string_view::npos) return false;
  // A line "name: ..." or "?name: ..." / "NAME: ..." (Lark rule or terminal).
  size_t i = 0;
  while (i < text.size()) {
    size_t k = i;
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
    if (k < text.size() && (text[k] == '?' || text[k] == '!')) ++k;
    const size_t start = k;
    while (k < text.size() && is_name_char(text[k], k == start)) ++k;
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
    if (k > start && k < text.size() && text[k] == ':') return true;
    const size_t nl = text.find('\n', i);
    if (nl == std::string_view::npos) break;
    i = nl + 1;
  }
  return false;
}

BnfGrammar parse_ebnf(std::string_view text) {
  if (text.size() > kMaxGrammarChars)
    throw GrammarError(fmt::format("grammar is too long (over {} bytes)", kMaxGrammarChars));
  if (looks_like_lark(text))
    throw GrammarError(
        "Lark-style grammars ('rule: ...') are not supported; write EBNF/GBNF rules "
        "('root ::= ...')");
  Parser p(text);
  const std::vector<RuleDef> defs = p.parse();
  if (defs.empty()) throw GrammarError("grammar is empty (it needs a 'root ::= ...' rule)");
  Lowerer low(p, defs);
  const std::vector<std::string> origin = low.origin();
  BnfGrammar g = low.take();
  prune_unproductive(g);
  reject_left_recursion(g, origin);
  return g;
}

}  // namespace pagoda::guided
