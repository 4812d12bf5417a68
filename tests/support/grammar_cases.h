// Grammars for the guided_grammar tests: random grammars built alongside an
// equivalent Python regex (so Python's re can judge what they accept), a
// JSON grammar written from RFC 8259 (judged by Python's json), and a
// depth-bounded JSON grammar for engine runs that must end "stop".
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::testing_guided {

// RFC 8259 JSON (any value, whitespace around it), written for these tests.
inline constexpr const char* kJsonGrammar = R"(# JSON text (RFC 8259)
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex{4} ) )* "\""
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
)";

// JSON with nesting at most 2 deep, at most 2 items per container, strings
// of at most 3 characters: every sentence is at most 239 bytes (str <= 20,
// v0 <= 20, a v1 container <= 4 + 43 + 46, a v2 one <= 4 + 116 + 119).
inline constexpr const char* kBoundedJsonGrammar = R"(root ::= v2
v0  ::= str | num | "true" | "false" | "null"
v1  ::= v0 | "[" ws ( v0 ( ws "," ws v0 )? )? ws "]" | "{" ws ( str ws ":" ws v0 ( ws "," ws str ws ":" ws v0 )? )? ws "}"
v2  ::= v1 | "[" ws ( v1 ( ws "," ws v1 )? )? ws "]" | "{" ws ( str ws ":" ws v1 ( ws "," ws str ws ":" ws v1 )? )? ws "}"
str ::= "\"" ( [a-zA-Z0-9 _é] | "\\" ["\\/nt] | "\\u00" [0-7] [0-9a-f] ){0,3} "\""
num ::= "-"? ( "0" | [1-9] [0-9]{0,3} ) ( "." [0-9]{1,2} )? ( [eE] [-+]? [0-9] )?
ws  ::= [ \n]?
)";
// Random grammars built alongside an equivalent Python regex.
class GrammarRegexGenerator {
 public:
  // bounded: quantifiers ? {2} {0,2} {1,3} only (every sentence is short:
  // at most 162 bytes), for engine runs that must end "stop".
  explicit GrammarRegexGenerator(uint64_t seed, bool bounded = false)
      : rng_(seed), bounded_(bounded) {}

  // {grammar text, Python regex}
  std::pair<std::string, std::string> next() {
    rules_.clear();
    auto [g, re] = expr(0);
    std::string text = "root ::= " + g + "\n";
    for (const auto& r : rules_) text += r + "\n";
    return {text, re};
  }

  static const std::vector<std::string>& alphabet() {
    static const std::vector<std::string> a = {"a", "b", "c", " ", "\"", "\\", "é", "α", "\n"};
    return a;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  std::pair<std::string, std::string> literal() {
    std::string g = "\"", re;
    const int n = 1 + pick(3);
    for (int k = 0; k < n; ++k) {
      const std::string& c = alphabet()[static_cast<size_t>(pick(9))];
      if (c == "\"")
        g += "\\\"";
      else if (c == "\\")
        g += pick(2) ? "\\\\" : "\\x5c";
      else if (c == "\n")
        g += "\\n";
      else if (c == "a" && pick(2))
        g += "\\x61";
      else if (c == "é" && pick(2))
        g += "\\u00e9";
      else
        g += c;
      re += c == "\\" ? "\\\\" : c;
    }
    return {g + "\"", re};
  }

  std::pair<std::string, std::string> char_class() {
    static const std::pair<const char*, const char*> kClasses[] = {
        {"[a-c]", "[a-c]"},         {"[^ab]", "[^ab]"},
        {"[\"\\\\]", "[\"\\\\]"},   {"[α-γé]", "[α-γé]"},
        {"[^\"\\\\]", "[^\"\\\\]"}, {"[ \\n]", "[ \\n]"},
        {"[^a-zé]", "[^a-zé]"},     {"[b]", "b"},
    };
    const auto& c = kClasses[pick(8)];
    return {c.first, c.second};
  }

  std::pair<std::string, std::string> expr(int depth) {
    switch (depth > 2 ? pick(2) : pick(8)) {
      case 0:
        return literal();
      case 1:
        return char_class();
      case 2: {  // a rule of its own
        auto [g, re] = expr(depth + 1);
        const std::string name = fmt::format("r{}-{}", depth, rules_.size());
        rules_.push_back(name + " ::= " + g);
        return {name, "(?:" + re + ")"};
      }
      case 3: {  // sequence
        auto [g1, r1] = expr(depth + 1);
        auto [g2, r2] = expr(depth + 1);
        return {g1 + " " + g2, r1 + r2};
      }
      case 4: {  // alternation
        auto [g1, r1] = expr(depth + 1);
        auto [g2, r2] = expr(depth + 1);
        return {"(" + g1 + " | " + g2 + ")", "(?:" + r1 + "|" + r2 + ")"};
      }
      case 5:
      case 6: {  // quantified group
        auto [g, re] = expr(depth + 1);
        static const char* kQ[] = {"?", "{2}", "{0,2}", "{1,3}", "*", "+", "{1,}"};
        const char* q = kQ[pick(bounded_ ? 4 : 7)];
        return {"(" + g + ")" + q, "(?:" + re + ")" + q};
      }
      default:
        return {"()", "(?:)"};
    }
  }

  std::mt19937_64 rng_;
  bool bounded_;
  std::vector<std::string> rules_;
};

}  // namespace pagoda::testing_guided
