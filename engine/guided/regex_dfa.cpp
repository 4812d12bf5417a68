#include "engine/guided/regex_dfa.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <unordered_set>
#include <utility>

#include "engine/guided/utf8_ranges.h"

namespace pagoda::guided {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code point intervals, inclusive

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// Complement over the Unicode scalar values (surrogates excluded).
Ranges complement(const Ranges& in) {
  Ranges r = normalize(in);
  r.emplace_back(0xD800, 0xDFFF);
  r = normalize(r);
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

// AST.
struct Node {
  enum Kind { kEmpty, kClass, kConcat, kAlt, kRepeat } kind = kEmpty;
  Ranges ranges;                            // kClass
  std::vector<std::unique_ptr<Node>> kids;  // kConcat, kAlt, kRepeat (one)
  int min = 0, max = -1;                    // kRepeat; max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}
NodePtr make_class(Ranges r) {
  auto n = make(Node::kClass);
  n->ranges = normalize(std::move(r));
  return n;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  NodePtr parse() {
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    NodePtr n = parse_alt(0);
    if (pos_ < p_.size()) fail(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    return n;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const { throw RegexError(pos_, std::string(what)); }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  NodePtr parse_alt(int depth) {
    if (depth > 200) fail("groups nested too deeply");
    auto alt = make(Node::kAlt);
    alt->kids.push_back(parse_concat(depth));
    while (!at_end() && peek() == '|') {
      ++pos_;
      alt->kids.push_back(parse_concat(depth));
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  NodePtr parse_concat(int depth) {
    auto cat = make(Node::kConcat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == p_.size()) {  // trailing anchor
        ++pos_;
        break;
      }
      cat->kids.push_back(parse_repeat(depth));
    }
    if (cat->kids.empty()) return make(Node::kEmpty);
    if (cat->kids.size() == 1) return std::move(cat->kids[0]);
    return cat;
  }

  // {n}, {n,}, {n,m} at pos_ (on '{'); false (pos_ unchanged) when the text
  // is not a quantifier (then '{' is a literal, as in Python).
  bool parse_braces(int& lo, int& hi) {
    size_t i = pos_ + 1;
    auto number = [&](int& out) {
      size_t start = i;
      long v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
        v = std::min<long>(v * 10 + (p_[i] - '0'), 1'000'000);
        ++i;
      }
      out = static_cast<int>(v);
      return i > start;
    };
    int a = 0, b = -1;
    bool has_a = number(a);
    if (i < p_.size() && p_[i] == '}') {
      if (!has_a) return false;
      b = a;
    } else if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(b)) b = -1;
      if (i >= p_.size() || p_[i] != '}') return false;
      if (!has_a) a = 0;  // Python: {,m} is {0,m}
    } else {
      return false;
    }
    if (a > kMaxRepeat || b > kMaxRepeat)
      fail(fmt::format("repetition count above {}", kMaxRepeat));
    if (b >= 0 && b < a) fail("min repeat greater than max repeat");
    pos_ = i + 1;
    lo = a;
    hi = b;
    return true;
  }

  NodePtr parse_repeat(int depth) {
    NodePtr atom = parse_atom(depth);
    while (!at_end()) {
      int lo = 0, hi = -1;
      char c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        lo = 1;
      } else if (c == '?') {
        ++pos_;
        hi = 1;
      } else if (c == '{') {
        if (!parse_braces(lo, hi)) break;
      } else {
        break;
      }
      if (!at_end() && (peek() == '?' || peek() == '+')) ++pos_;  // lazy / possessive
      if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?')) fail("multiple repeat");
      auto rep = make(Node::kRepeat);
      rep->min = lo;
      rep->max = hi;
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  uint32_t next_code_point() {
    const auto b0 = static_cast<unsigned char>(p_[pos_]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > p_.size()) fail("invalid UTF-8 in pattern");
    uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(p_[pos_ + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in pattern");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  uint32_t hex(size_t digits) {
    if (pos_ + digits > p_.size()) fail("incomplete hex escape");
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      char c = p_[pos_ + k];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) fail("bad hex digit in escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += digits;
    if (v > kMaxCodePoint) fail("code point above U+10FFFF");
    return v;
  }

  // After a backslash: the set it stands for. in_class: \b is backspace.
  Ranges parse_escape(bool in_class) {
    if (at_end()) fail("pattern ends with a backslash");
    const char c = p_[pos_++];
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (c) {
      case 'd':
        return kDigit;
      case 'D':
        return complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return complement(kSpace);
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case 'a':
        return one('\a');
      case '0':
        return one(0);
      case 'x':
        return one(hex(2));
      case 'U':
        return one(hex(8));
      case 'u':
        if (!at_end() && peek() == '{') {
          ++pos_;
          size_t end = p_.find('}', pos_);
          if (end == std::string_view::npos || end == pos_ || end - pos_ > 6)
            fail("bad \\u{...} escape");
          uint32_t v = hex(end - pos_);
          ++pos_;
          return one(v);
        }
        return one(hex(4));
      case 'b':
        if (in_class) return one('\b');
        fail("word boundary \\b is not supported");
      case 'B':
        fail("\\B is not supported");
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        fail(fmt::format("anchor \\{} is not supported", c));
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      fail(fmt::format("unknown escape \\{}", c));
    --pos_;
    return one(next_code_point());  // escaped punctuation or any other character
  }

  NodePtr parse_class() {
    // pos_ is after '['.
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges set;
    bool first = true;
    for (;;) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      // One item: a code point (maybe a range start) or an escape set.
      auto item = [&](bool& single) -> Ranges {
        if (peek() == '\\') {
          ++pos_;
          Ranges r = parse_escape(true);
          single = r.size() == 1 && r[0].first == r[0].second;
          return r;
        }
        if (peek() == '[' && pos_ + 1 < p_.size() && p_[pos_ + 1] == ':')
          fail("POSIX classes [:name:] are not supported");
        single = true;
        uint32_t cp = next_code_point();
        return Ranges{{cp, cp}};
      };
      bool single_lo = false;
      Ranges lo = item(single_lo);
      if (single_lo && pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        bool single_hi = false;
        Ranges hi = item(single_hi);
        if (!single_hi) fail("bad character range");
        if (hi[0].first < lo[0].first) fail("bad character range (end before start)");
        set.emplace_back(lo[0].first, hi[0].first);
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    if (negate) set = complement(set);
    if (set.empty()) fail("empty character class");
    return make_class(std::move(set));
  }

  NodePtr parse_atom(int depth) {
    const char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (!at_end() && peek() == '?') {
          ++pos_;
          if (!at_end() && peek() == ':') {
            ++pos_;
          } else if (!at_end() && (peek() == 'P' || peek() == '<') &&
                     !(peek() == '<' && pos_ + 1 < p_.size() &&
                       (p_[pos_ + 1] == '=' || p_[pos_ + 1] == '!'))) {
            if (peek() == 'P') ++pos_;
            if (at_end() || peek() != '<') fail("unsupported (?P...) group");
            size_t end = p_.find('>', pos_);
            if (end == std::string_view::npos) fail("unterminated group name");
            pos_ = end + 1;
          } else if (!at_end() && (peek() == '=' || peek() == '!' || peek() == '<')) {
            fail("lookaround assertions are not supported");
          } else {
            fail("inline flags and other (?...) groups are not supported");
          }
        }
        NodePtr inner = parse_alt(depth + 1);
        if (at_end() || peek() != ')') fail("missing ')'");
        ++pos_;
        return inner;
      }
      case '[':
        ++pos_;
        return parse_class();
      case '.':
        ++pos_;
        return make_class(complement({{'\n', '\n'}}));
      case '\\':
        ++pos_;
        return make_class(parse_escape(false));
      case '*':
      case '+':
      case '?':
        fail("nothing to repeat");
      case '^':
        fail("'^' inside the pattern is not supported (anchors are implicit)");
      case '$':
        fail("'$' inside the pattern is not supported (anchors are implicit)");
      default: {
        uint32_t cp = next_code_point();
        return make_class({{cp, cp}});
      }
    }
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

namespace detail {

using ByteSeq = Utf8ByteSeq;

// Thompson NFA.
struct Nfa {
  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int32_t> eps;
  };
  std::vector<State> states;

  int32_t add() {
    if (states.size() >= kMaxNfaStates)
      throw RegexTooComplex(fmt::format(
          "pattern too complex: regex too large (more than {} automaton states)", kMaxNfaStates));
    states.emplace_back();
    return static_cast<int32_t>(states.size() - 1);
  }
  void eps(int32_t a, int32_t b) { states[static_cast<size_t>(a)].eps.push_back(b); }
  void edge(int32_t a, uint8_t lo, uint8_t hi, int32_t b) {
    states[static_cast<size_t>(a)].edges.push_back({lo, hi, b});
  }

  struct Frag {
    int32_t start, end;
  };

  Frag build(const Node& n) {
    switch (n.kind) {
      case Node::kEmpty: {
        int32_t s = add();
        return {s, s};
      }
      case Node::kClass: {
        int32_t s = add(), e = add();
        std::vector<ByteSeq> seqs;
        for (auto [lo, hi] : n.ranges) utf8_sequences(lo, hi, seqs);
        for (const ByteSeq& seq : seqs) {
          int32_t cur = s;
          for (size_t i = 0; i < seq.size(); ++i) {
            int32_t to = i + 1 == seq.size() ? e : add();
            edge(cur, seq[i].first, seq[i].second, to);
            cur = to;
          }
        }
        return {s, e};
      }
      case Node::kConcat: {
        Frag f = build(*n.kids[0]);
        for (size_t i = 1; i < n.kids.size(); ++i) {
          Frag g = build(*n.kids[i]);
          eps(f.end, g.start);
          f.end = g.end;
        }
        return f;
      }
      case Node::kAlt: {
        int32_t s = add(), e = add();
        for (const auto& k : n.kids) {
          Frag g = build(*k);
          eps(s, g.start);
          eps(g.end, e);
        }
        return {s, e};
      }
      case Node::kRepeat: {
        const Node& sub = *n.kids[0];
        int32_t s = add();
        Frag f{s, s};
        for (int i = 0; i < n.min; ++i) {
          Frag g = build(sub);
          eps(f.end, g.start);
          f.end = g.end;
        }
        if (n.max < 0) {  // star: loop
          int32_t hub = add();
          Frag g = build(sub);
          eps(f.end, hub);
          eps(hub, g.start);
          eps(g.end, hub);
          f.end = hub;
        } else if (n.max > n.min) {  // nested optionals: (x(x(x)?)?)?
          int32_t e = add();
          int32_t cur = f.end;
          for (int i = n.min; i < n.max; ++i) {
            Frag g = build(sub);
            eps(cur, g.start);
            eps(cur, e);
            cur = g.end;
          }
          eps(cur, e);
          f.end = e;
        }
        return f;
      }
    }
    throw RegexError("internal: bad regex node");
  }
};

// The number of states build(n) adds, computed from the AST without
// building (saturating at kHuge): counted repetition multiplies its
// operand's size, so nested bounds make the product of their counts.
constexpr uint64_t kHuge = uint64_t{1} << 62;
uint64_t sat_add(uint64_t a, uint64_t b) { return std::min(a + b, kHuge); }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kHuge / b ? kHuge : std::min(a * b, kHuge);
}
uint64_t nfa_size(const Node& n) {
  switch (n.kind) {
    case Node::kEmpty:
      return 1;
    case Node::kClass: {
      std::vector<ByteSeq> seqs;
      for (auto [lo, hi] : n.ranges) utf8_sequences(lo, hi, seqs);
      uint64_t k = 2;
      for (const ByteSeq& seq : seqs) k += seq.size() - 1;
      return k;
    }
    case Node::kConcat:
    case Node::kAlt: {
      uint64_t k = n.kind == Node::kAlt ? 2 : 0;
      for (const auto& kid : n.kids) k = sat_add(k, nfa_size(*kid));
      return k;
    }
    case Node::kRepeat: {
      const uint64_t sub = nfa_size(*n.kids[0]);
      uint64_t k = sat_add(1, sat_mul(static_cast<uint64_t>(n.min), sub));
      if (n.max < 0) {
        k = sat_add(k, sat_add(1, sub));
      } else if (n.max > n.min) {
        k = sat_add(k, sat_add(1, sat_mul(static_cast<uint64_t>(n.max - n.min), sub)));
      }
      return k;
    }
  }
  return kHuge;
}

}  // namespace detail

namespace {

using detail::Nfa;

size_t hash_set(const std::vector<int32_t>& v) {
  size_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
  return h;
}

// DFA state ids hashed and compared by their NFA state sets (stored once,
// in `sets`).
struct SetIdHash {
  const std::vector<size_t>* hashes;
  size_t operator()(int32_t id) const { return (*hashes)[static_cast<size_t>(id)]; }
};
struct SetIdEq {
  const std::vector<std::vector<int32_t>>* sets;
  bool operator()(int32_t a, int32_t b) const {
    return (*sets)[static_cast<size_t>(a)] == (*sets)[static_cast<size_t>(b)];
  }
};

}  // namespace

ByteDfa ByteDfa::compile(std::string_view pattern) {
  NfaBuilder b;
  const int32_t start = b.add_state();
  const int32_t end = b.add_regex(start, pattern);
  return b.build(start, end);
}

NfaBuilder::NfaBuilder() : nfa_(std::make_unique<detail::Nfa>()) {}
NfaBuilder::~NfaBuilder() = default;

int32_t NfaBuilder::add_state() {
  if (nfa_->states.size() >= kMaxNfaStates) full_ = true;
  return nfa_->add();
}

void NfaBuilder::add_edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
  nfa_->edge(from, lo, hi, to);
}

void NfaBuilder::add_epsilon(int32_t from, int32_t to) { nfa_->eps(from, to); }

int32_t NfaBuilder::add_regex(int32_t from, std::string_view pattern) {
  NodePtr ast = Parser(pattern).parse();
  // Refused before any state is built (the work is bounded up front).
  const uint64_t size = detail::nfa_size(*ast);
  if (size > kMaxNfaStates)
    throw RegexTooComplex(fmt::format(
        "pattern too complex: its repetitions expand to {} automaton states (more than {} "
        "automaton states; nested counted repetitions multiply)",
        size >= detail::kHuge ? std::string("too many") : fmt::format("about {}", size),
        kMaxNfaStates));
  if (nfa_->states.size() + size > kMaxNfaStates) {
    full_ = true;
    throw RegexTooComplex(
        fmt::format("pattern too complex: regex too large (more than {} automaton states together)",
                    kMaxNfaStates));
  }
  const Nfa::Frag f = nfa_->build(*ast);
  nfa_->eps(from, f.start);
  return f.end;
}

int32_t NfaBuilder::add_literal(int32_t from, std::string_view bytes) {
  int32_t cur = from;
  for (char ch : bytes) {
    const int32_t next = add_state();
    const auto b = static_cast<uint8_t>(ch);
    nfa_->edge(cur, b, b, next);
    cur = next;
  }
  return cur;
}

size_t NfaBuilder::num_states() const { return nfa_->states.size(); }

ByteDfa NfaBuilder::build(int32_t start, int32_t accept) const {
  return ByteDfa::determinize(*nfa_, start, accept);
}

ByteDfa ByteDfa::determinize(const detail::Nfa& nfa, int32_t start_state, int32_t final_state) {
  // Byte equivalence classes: bytes no edge boundary separates.
  std::array<bool, 257> cut{};
  for (const auto& st : nfa.states)
    for (const auto& e : st.edges) {
      cut[e.lo] = true;
      cut[static_cast<size_t>(e.hi) + 1] = true;
    }
  ByteDfa dfa;
  uint8_t cls = 0;
  for (int b = 0; b < 256; ++b) {
    if (b > 0 && cut[static_cast<size_t>(b)]) ++cls;
    dfa.byte_class_[b] = cls;
  }
  const size_t nc = static_cast<size_t>(cls) + 1;
  dfa.num_classes_ = nc;

  // Subset construction, its work and memory bounded as it goes
  // (kMaxSubsetWork, kMaxDfaSetEntries, kMaxDfaStates): each check comes
  // before the next closure's or state's cost, so a pattern past a limit
  // fails after at most about a limit's worth of work.
  size_t work = 0, entries = 0;
  auto charge = [&](size_t steps) {
    work += steps;
    if (work > kMaxSubsetWork)
      throw RegexTooComplex(fmt::format(
          "pattern too complex: building its automaton takes more than {} steps (limits: {} DFA "
          "states, {} NFA states in them together, {} steps)",
          kMaxSubsetWork, kMaxDfaStates, kMaxDfaSetEntries, kMaxSubsetWork));
  };
  std::vector<uint32_t> mark(nfa.states.size(), 0);
  uint32_t epoch = 0;
  auto closure = [&](std::vector<int32_t>& set) {
    ++epoch;
    std::vector<int32_t> stack(set);
    set.clear();
    for (int32_t s : stack) mark[static_cast<size_t>(s)] = epoch;
    size_t steps = 0;
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      set.push_back(s);
      const auto& eps = nfa.states[static_cast<size_t>(s)].eps;
      steps += 1 + eps.size();
      for (int32_t t : eps)
        if (mark[static_cast<size_t>(t)] != epoch) {
          mark[static_cast<size_t>(t)] = epoch;
          stack.push_back(t);
        }
    }
    charge(steps);
    // Only states with byte edges or the final state matter for identity.
    std::erase_if(set, [&](int32_t s) {
      return s != final_state && nfa.states[static_cast<size_t>(s)].edges.empty();
    });
    std::sort(set.begin(), set.end());
  };
  std::vector<std::vector<int32_t>> sets;
  std::vector<size_t> hashes;
  std::unordered_set<int32_t, SetIdHash, SetIdEq> ids(64, SetIdHash{&hashes}, SetIdEq{&sets});
  std::vector<int32_t> next;
  auto intern = [&](std::vector<int32_t>&& set) -> int32_t {
    charge(set.size());
    const auto id = static_cast<int32_t>(sets.size());
    hashes.push_back(hash_set(set));
    sets.push_back(std::move(set));
    const auto [it, inserted] = ids.insert(id);
    if (!inserted) {  // seen: the candidate goes
      sets.pop_back();
      hashes.pop_back();
      return *it;
    }
    if (sets.size() > kMaxDfaStates)
      throw RegexTooComplex(
          fmt::format("pattern too complex (more than {} DFA states)", kMaxDfaStates));
    sets.back().shrink_to_fit();  // the closure's vector had room for its epsilon states
    entries += sets.back().size();
    if (entries > kMaxDfaSetEntries)
      throw RegexTooComplex(fmt::format(
          "pattern too complex: its automaton's states hold more than {} NFA states together "
          "(about {} MB; limits: {} DFA states, {} NFA states in them together)",
          kMaxDfaSetEntries, kMaxDfaSetEntries * sizeof(int32_t) >> 20, kMaxDfaStates,
          kMaxDfaSetEntries));
    next.resize(sets.size() * nc, kDead);
    return id;
  };
  {
    std::vector<int32_t> s0{start_state};
    closure(s0);
    intern(std::move(s0));
  }
  std::vector<std::vector<int32_t>> buckets(nc);
  for (size_t d = 0; d < sets.size(); ++d) {
    for (auto& b : buckets) b.clear();
    for (int32_t s : sets[d]) {
      size_t steps = 1;
      for (const auto& e : nfa.states[static_cast<size_t>(s)].edges) {
        steps += 1u + dfa.byte_class_[e.hi] - dfa.byte_class_[e.lo];
        for (size_t c = dfa.byte_class_[e.lo]; c <= dfa.byte_class_[e.hi]; ++c)
          buckets[c].push_back(e.to);
      }
      charge(steps);
    }
    for (size_t c = 0; c < nc; ++c) {
      if (buckets[c].empty()) continue;
      std::vector<int32_t> t = buckets[c];
      closure(t);
      int32_t id = intern(std::move(t));
      next[d * nc + c] = id;
    }
  }
  const size_t n = sets.size();
  std::vector<uint8_t> accept(n, 0);
  for (size_t d = 0; d < n; ++d)
    accept[d] = std::binary_search(sets[d].begin(), sets[d].end(), final_state);

  // Live states: those that reach an accepting one.
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t d = 0; d < n; ++d)
    for (size_t c = 0; c < nc; ++c)
      if (next[d * nc + c] >= 0)
        rev[static_cast<size_t>(next[d * nc + c])].push_back(static_cast<int32_t>(d));
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> stack;
  for (size_t d = 0; d < n; ++d)
    if (accept[d]) {
      live[d] = 1;
      stack.push_back(static_cast<int32_t>(d));
    }
  while (!stack.empty()) {
    int32_t d = stack.back();
    stack.pop_back();
    for (int32_t p : rev[static_cast<size_t>(d)])
      if (!live[static_cast<size_t>(p)]) {
        live[static_cast<size_t>(p)] = 1;
        stack.push_back(p);
      }
  }
  if (!live[0]) throw RegexError("the pattern matches no string");
  std::vector<int32_t> remap(n, kDead);
  int32_t count = 0;
  for (size_t d = 0; d < n; ++d)
    if (live[d]) remap[d] = count++;
  dfa.next_.assign(static_cast<size_t>(count) * nc, kDead);
  dfa.accept_.assign(static_cast<size_t>(count), 0);
  dfa.has_out_.assign(static_cast<size_t>(count), 0);
  for (size_t d = 0; d < n; ++d) {
    if (!live[d]) continue;
    const auto nd = static_cast<size_t>(remap[d]);
    dfa.accept_[nd] = accept[d];
    for (size_t c = 0; c < nc; ++c) {
      int32_t t = next[d * nc + c];
      int32_t nt = t >= 0 ? remap[static_cast<size_t>(t)] : kDead;
      dfa.next_[nd * nc + c] = nt;
      if (nt >= 0) dfa.has_out_[nd] = 1;
    }
  }
  dfa.start_ = remap[0];
  return dfa;
}

int32_t ByteDfa::walk(int32_t s, std::string_view bytes) const {
  for (char ch : bytes) {
    if (s < 0) return kDead;
    s = next(s, static_cast<uint8_t>(ch));
  }
  return s;
}

bool ByteDfa::matches(std::string_view text) const {
  int32_t s = walk(start_, text);
  return s >= 0 && accepting(s);
}

int64_t ByteDfa::max_match_length() const {
  // Longest path from the start by depth-first search (every live state
  // reaches an accepting one, so the longest path ends at one); a back edge
  // means a cycle.
  const size_t n = accept_.size();
  std::vector<int64_t> longest(n, -1);
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<int32_t, size_t>> stack{{start_, 0}};
  color[static_cast<size_t>(start_)] = 1;
  while (!stack.empty()) {
    auto& [s, c] = stack.back();
    if (c < num_classes_) {
      const int32_t t = next_[static_cast<size_t>(s) * num_classes_ + c++];
      if (t < 0) continue;
      if (color[static_cast<size_t>(t)] == 1) return -1;
      if (color[static_cast<size_t>(t)] == 0) {
        color[static_cast<size_t>(t)] = 1;
        stack.emplace_back(t, 0);
      }
      continue;
    }
    int64_t best = 0;
    for (size_t k = 0; k < num_classes_; ++k) {
      const int32_t t = next_[static_cast<size_t>(s) * num_classes_ + k];
      if (t >= 0) best = std::max(best, longest[static_cast<size_t>(t)] + 1);
    }
    longest[static_cast<size_t>(s)] = best;
    color[static_cast<size_t>(s)] = 2;
    stack.pop_back();
  }
  return longest[static_cast<size_t>(start_)];
}

bool ByteDfa::uses_byte(uint8_t b) const {
  for (size_t s = 0; s < accept_.size(); ++s)
    if (next(static_cast<int32_t>(s), b) >= 0) return true;
  return false;
}

std::string regex_escape(std::string_view text) {
  static constexpr std::string_view kMeta = "\\^$.|?*+()[]{}-/";
  std::string out;
  for (char c : text) {
    if (kMeta.find(c) != std::string_view::npos) out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace pagoda::guided
