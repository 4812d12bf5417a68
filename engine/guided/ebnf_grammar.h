// EBNF / GBNF grammar text -> a byte-level context-free grammar (BNF), for
// guided_grammar (vLLM with xgrammar). Syntax (xgrammar's EBNF, itself
// llama.cpp's GBNF; see xgrammar's cpp/grammar_parser.cc):
//
//   rule     ::= NAME "::=" choices        (a rule starts where NAME "::=" is)
//   choices  ::= sequence ("|" sequence)*
//   sequence ::= (element quantifier?)+
//   element  ::= "\"...\"" | "[...]" | "[^...]" | NAME | "(" choices ")" | "()"
//   quantifier ::= "*" | "+" | "?" | "{" m "}" | "{" m "," "}" | "{" m "," n "}"
//
// NAME: [A-Za-z_.-][A-Za-z0-9_.-]*; "#" starts a comment to the end of the
// line. String escapes: \" \' \? \\ \a \b \e \f \n \r \t \v \0, \xHH,
// \uHHHH, \UHHHHHHHH (a code point, written as UTF-8); inside a class also
// \^ \$ \. \* \+ \( \) \[ \] \{ \} \| \/ \-. Classes are sets of code points
// (UTF-8 in the output; surrogates excluded); "-" first or last is literal.
// The start rule is "root". Not supported (an error naming it): Lark
// syntax ("rule: ..."), lookahead assertions "(= ...)", xgrammar's macros
// (TagDispatch, Token, ExcludeToken, TokenTagDispatch, Regex), "." (a name
// character here, as in xgrammar, so "." alone is an undefined rule),
// class escapes \d \s \w (xgrammar rejects them too), and left recursion
// through a non-tail call (an error naming the rule; repeating something
// nullable, as in (x?)*, is fine).
//
// Lowering: quantifiers become helper rules (x* -> R ::= x R | ""; x+ ->
// x x*; x? -> R ::= x | ""; x{m,n} -> m copies then nested optionals), a
// class becomes byte-set terminals (RE2's UTF-8 range splitting: one
// terminal when all its characters are single bytes, else one alternative
// per byte-range sequence). Alternatives that cannot derive any string are
// removed (so every parser state can still complete); a root that derives
// nothing is an error.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::guided {

// A malformed, unsupported or too large grammar; what() names the problem
// (with "line L, column C" where it has a place).
class GrammarError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Limits that keep compilation bounded (a 400, not a stall).
inline constexpr size_t kMaxGrammarChars = 1'000'000;
inline constexpr size_t kMaxGrammarSymbols = 2'000'000;  // symbols after lowering
inline constexpr int64_t kMaxGrammarRepeat = 1'000;      // largest m / n of {m,n}

// A set of bytes: bit (b % 64) of words[b / 64].
using ByteSet = std::array<uint64_t, 4>;

struct BnfSymbol {
  int32_t rule = -1;     // >= 0: a nonterminal (index into BnfGrammar::rules)
  int32_t byteset = -1;  // else: a terminal, index into BnfGrammar::bytesets
};

struct BnfGrammar {
  struct Rule {
    std::string name;                          // helpers: "<parent>#<n>"
    std::vector<std::vector<BnfSymbol>> alts;  // alternatives ("" = empty)
  };
  std::vector<Rule> rules;
  std::vector<ByteSet> bytesets;  // distinct terminals
  int32_t root = -1;
};

// Parses and lowers `text`. Throws GrammarError.
BnfGrammar parse_ebnf(std::string_view text);

// True when `text` looks like a Lark grammar (rules written "name: ...",
// no "::="), as vLLM's grammar_is_likely_lark decides.
bool looks_like_lark(std::string_view text);

}  // namespace pagoda::guided
