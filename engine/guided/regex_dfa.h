// Regular expression -> deterministic automaton over bytes (UTF-8), for
// guided decoding (guided_regex, guided_choice, JSON schemas compiled to a
// regex). The whole output must match: anchors are implicit ("^" at the
// start and "$" at the end are accepted and mean nothing more).
//
// Algorithm: a recursive-descent parser builds Thompson's NFA (Thompson,
// "Regular expression search algorithm", CACM 1968; as in Russ Cox's
// "Regular Expression Matching Can Be Simple And Fast"), code-point classes
// become UTF-8 byte-range sequences (the range splitting of RE2 / Rust
// regex-syntax's Utf8Sequences), then the subset construction (Rabin-Scott)
// gives the DFA over byte equivalence classes, and states from which no
// accepting state is reachable are removed (a transition into them is dead).
//
// Syntax (Python `re` / ECMAScript subset): literals; "." (any code point
// but "\n"); classes "[...]" / "[^...]" with ranges and escapes; escapes
// \d \D \w \W \s \S (ASCII meanings), \n \r \t \f \v \0, \xHH, \uHHHH,
// \u{H...}, and an escaped punctuation character; groups "(...)",
// "(?:...)", "(?P<name>...)", "(?<name>...)"; alternation "|"; quantifiers
// * + ? {n} {n,} {n,m} (a lazy "?" or possessive "+" suffix is accepted:
// laziness does not change what matches). Not supported (an error naming
// it): backreferences, lookaround, \b \B, inline flags.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::guided {

// An invalid or unsupported pattern, or one whose automaton exceeds the
// limits below; what() names the problem and the offset.
class RegexError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
  // A syntax error at `offset` in the pattern: what() is "invalid regex at
  // offset N: detail"; offset() and detail() let a caller that compiled a
  // piece of a larger text report the offset in that text.
  RegexError(size_t offset, const std::string& detail)
      : std::invalid_argument("invalid regex at offset " + std::to_string(offset) + ": " + detail),
        offset_(offset),
        detail_(detail) {}
  size_t offset() const { return offset_; }  // npos: not a syntax error
  const std::string& detail() const { return detail_; }

 private:
  size_t offset_ = std::string::npos;
  std::string detail_;
};

// A pattern past one of the size / work limits below (what() says "too
// complex" and names the limit).
class RegexTooComplex : public RegexError {
 public:
  using RegexError::RegexError;
};

// Limits that keep compilation bounded (a 400, not a stall or an
// out-of-memory kill). Each is checked before the work or memory it bounds
// is spent:
//  - kMaxNfaStates: the NFA's states, estimated from the parsed pattern
//    before it is built (counted repetition copies its operand, so nested
//    bounds multiply: ((a{1,50}){1,50}){1,50} is 125,000 copies of `a`);
//  - kMaxDfaStates: the subset construction's states;
//  - kMaxDfaSetEntries: the NFA states held by all DFA states together (the
//    construction's memory: 4 bytes each, so about 64 MB at the limit);
//  - kMaxSubsetWork: the steps of the subset construction (closure visits,
//    edge moves, set hashing), well under a second of one core at the limit.
// vLLM's backends bound this differently (xgrammar and outlines compile
// lazily or with their own limits); here one request's compilation is
// refused up front with a RegexError naming the limit.
inline constexpr size_t kMaxNfaStates = 400'000;
inline constexpr size_t kMaxDfaStates = 30'000;
inline constexpr size_t kMaxDfaSetEntries = 16'000'000;
inline constexpr size_t kMaxSubsetWork = 100'000'000;
inline constexpr int kMaxRepeat = 1'000;  // largest n / m of {n,m}

namespace detail {
struct Nfa;
}

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;

  // Compiles `pattern`. Throws RegexError.
  static ByteDfa compile(std::string_view pattern);

  int32_t start() const { return start_; }
  // Next state after byte b from state s (s >= 0), or kDead.
  int32_t next(int32_t s, uint8_t b) const {
    return next_[static_cast<size_t>(s) * num_classes_ + byte_class_[b]];
  }
  bool accepting(int32_t s) const { return accept_[static_cast<size_t>(s)] != 0; }
  // True when some byte leads from s to a live state.
  bool has_transition(int32_t s) const { return has_out_[static_cast<size_t>(s)] != 0; }
  size_t num_states() const { return accept_.size(); }
  // State after `bytes` from s, or kDead.
  int32_t walk(int32_t s, std::string_view bytes) const;
  // True when the whole of `text` matches.
  bool matches(std::string_view text) const;
  // Length in bytes of the longest match, or -1 when matches are unbounded
  // (the live automaton has a cycle).
  int64_t max_match_length() const;
  // True when some match contains byte b (a live transition on it).
  bool uses_byte(uint8_t b) const;

 private:
  friend class NfaBuilder;
  // The subset construction from `start` (states whose closure holds
  // `final_state` accept), then the removal of dead states.
  static ByteDfa determinize(const detail::Nfa& nfa, int32_t start, int32_t final_state);

  int32_t start_ = 0;
  size_t num_classes_ = 1;
  uint8_t byte_class_[256] = {};
  std::vector<int32_t> next_;  // [num_states * num_classes]
  std::vector<uint8_t> accept_;
  std::vector<uint8_t> has_out_;
};

// A Thompson NFA over bytes assembled from regexes, literal byte strings and
// raw byte-range edges, then determinized as ByteDfa::compile does (which
// is this with one regex): for automata no single regex writes, e.g. the
// structural tag's trigger scanner (structural_tag.h). States are ids from
// add_state (or returned by add_regex / add_literal). Throws RegexTooComplex
// past the limits above, RegexError when no string reaches `accept`.
class NfaBuilder {
 public:
  NfaBuilder();
  ~NfaBuilder();
  NfaBuilder(const NfaBuilder&) = delete;
  NfaBuilder& operator=(const NfaBuilder&) = delete;

  int32_t add_state();
  // An edge on the bytes [lo, hi].
  void add_edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to);
  void add_epsilon(int32_t from, int32_t to);
  // `pattern`'s automaton entered from `from`; returns the state its
  // matches end in. Throws RegexError for an invalid pattern.
  int32_t add_regex(int32_t from, std::string_view pattern);
  // `bytes` verbatim from `from`; returns the state after them (`from`
  // itself when empty).
  int32_t add_literal(int32_t from, std::string_view bytes);
  size_t num_states() const;
  // True once a state or a regex was refused because the builder's states
  // together would pass kMaxNfaStates (not the one regex alone).
  bool full() const { return full_; }
  // The DFA of the byte strings that lead from `start` to `accept`.
  ByteDfa build(int32_t start, int32_t accept) const;

 private:
  std::unique_ptr<detail::Nfa> nfa_;
  bool full_ = false;
};

// `text` as a regex matching exactly it (every metacharacter escaped).
std::string regex_escape(std::string_view text);

}  // namespace pagoda::guided
