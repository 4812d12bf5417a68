// engine/guided/ebnf_grammar.h and grammar_automaton.h (guided_grammar):
// the EBNF parser's syntax and errors; the recogniser against references
// no one here wrote (Python's re on random grammars equivalent to regexes,
// Python's json on a JSON grammar written from RFC 8259), through
// tests/support/compare_grammar.py; states are interned (bounded stacks for
// repetition); token masks agree with a brute-force walk of Qwen2's vocabulary.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/guided/ebnf_grammar.h"
#include "engine/guided/grammar_automaton.h"
#include "engine/guided/guide.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/grammar_cases.h"

namespace pagoda::guided {
namespace {

using testing_guided::kJsonGrammar;

bool accepts(const GrammarAutomaton& a, std::string_view s) {
  const int32_t st = a.walk(a.start(), s);
  return st >= 0 && a.accepting(st);
}

std::string error_of(const std::string& grammar) {
  try {
    parse_ebnf(grammar);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(EbnfGrammar, Syntax) {
  struct Case {
    const char* grammar;
    std::vector<const char*> yes, no;
  } cases[] = {
      {"root ::= \"ab\" | \"c\"", {"ab", "c"}, {"", "a", "abc", "b"}},
      {"root ::= x+ y?\nx ::= [a-c]\ny ::= \"!\"", {"a", "abc!", "cc"}, {"", "!", "ad", "a!!"}},
      {"root ::= [^a-z]*", {"", "A9", "é中", "\n"}, {"a", "Az"}},
      {"root ::= \"\\x41\\u00e9\\U0001F600\\n\\t\\\"\\\\\"", {"Aé😀\n\t\"\\"}, {"A"}},
      {"root ::= [a]{2,3} [b]{2} [c]{1,}", {"aabbc", "aaabbccc"}, {"abbc", "aaaabbc", "aabbbc"}},
      {"root ::= ( \"x\" () | () )", {"x", ""}, {"xx"}},
      {"root ::= [-a] [a-] [\\]\\-\\[]", {"-a]", "aa-", "a-["}, {"ab]"}},
      {"# comment\nroot ::= a # trailing\n   a ::= \"q\"   # more\n", {"q"}, {""}},
      {"root ::= paren*\nparen ::= \"(\" paren* \")\"",
       {"", "()", "(())()", "((()))"},
       {"(", ")(", "(()"}},
      {"root ::= \"\" | \"a\" root", {"", "a", "aaaa"}, {"b"}},
      {"root ::= rule-name.x\nrule-name.x ::= \"k\"", {"k"}, {""}},
      // Repeating something nullable is a cycle through tail calls only: fine.
      {"root ::= ((\"a\")*)* (\"b\"?)+ w\nw ::= (w2)*\nw2 ::= \" \"?",
       {"", "aa", "b", "aabb ", "  "},
       {"ba", "a a"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.grammar);
    GrammarAutomaton a(parse_ebnf(c.grammar));
    for (const char* s : c.yes) EXPECT_TRUE(accepts(a, s)) << s;
    for (const char* s : c.no) EXPECT_FALSE(accepts(a, s)) << s;
  }
}

TEST(EbnfGrammar, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= foo", "line 1, column 10: rule 'foo' is not defined"},
      {"main ::= \"a\"", "no 'root' rule"},
      {"", "grammar is empty"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= \"abc", "line 1, column 10: unterminated string"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root ::= \"a\" |", "expected an element"},
      {"root ::= [z-a]", "range is reversed"},
      {"root ::= \"a\"{3,1}", "lower bound is larger"},
      {"root ::= \"a\"{5000}", "above 1000"},
      {"root ::= \"a\"**", "cannot follow another"},
      {"root ::= \"\\q\"", "invalid escape '\\q'"},
      {"root ::= [\\d]", "'\\d' is not supported"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= .", "rule '.' is not defined"} /* '.' is a name character, as in xgrammar */,
      {"root ::= 'a'", "double quotes"},
      {"root ::= (= \"a\") \"b\"", "lookahead assertions"},
      {"root ::= TagDispatch((\"a\", x))", "macros"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
      {"root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"", "rule 'x' is left-recursive"},
      {"root ::= e\ne ::= t | e \"+\" t\nt ::= [0-9]", "rule 'e' is left-recursive"},
      {"root ::= \"a\" root", "accepts no string"},
      {"start: \"a\" | b\nb: \"c\"", "Lark-style grammars"},
      {"?start: value\nvalue: NUMBER", "Lark-style grammars"},
  };
  for (const auto& [g, want] : cases) {
    const std::string got = error_of(g);
    EXPECT_NE(got.find(want), std::string::npos) << "grammar: " << g << "\nerror: " << got;
  }
  EXPECT_TRUE(looks_like_lark("start: \"a\""));
  EXPECT_FALSE(looks_like_lark("root ::= \"a:b\""));
}

TEST(GrammarAutomaton, StatesAreInternedAndRepetitionKeepsStacksFlat) {
  GrammarAutomaton a(parse_ebnf("root ::= (\"ab\" | [0-9]+ \",\")*"));
  int32_t s = a.start();
  for (int i = 0; i < 2000; ++i) s = a.walk(s, i % 2 ? "ab" : "12,");
  ASSERT_GE(s, 0);
  EXPECT_TRUE(a.accepting(s));
  EXPECT_LE(a.num_states(), 4u);  // the same configuration each round
  EXPECT_EQ(a.walk(a.start(), "ab12,"), a.walk(a.walk(a.start(), "ab"), "12,"));
  EXPECT_EQ(a.walk(a.start(), "ab1x"), kDeadState);
  // Nesting grows the stack; closing it comes back to interned states.
  GrammarAutomaton j(parse_ebnf(kJsonGrammar));
  const int32_t open3 = j.walk(j.start(), "[[[");
  const int32_t again = j.walk(j.walk(open3, "1]]"), "]");
  EXPECT_EQ(again, j.walk(j.start(), "[]"));
  EXPECT_FALSE(j.overflowed());
}

// An exponentially ambiguous grammar: after n "(" the parser holds 2^n
// stacks (each level may close with ")" or "]"). Past kMaxGrammarStacks a
// walk is refused (dead: the output would end) and the overflow is reported.
TEST(GrammarAutomaton, AmbiguityPastTheBoundsIsRefusedAndReported) {
  GrammarAutomaton a(parse_ebnf("root ::= s\ns ::= \"(\" s \")\" | \"(\" s \"]\" | \"\""));
  EXPECT_TRUE(accepts(a, "(()]"));
  EXPECT_FALSE(accepts(a, "(()"));
  EXPECT_GE(a.walk(a.start(), std::string(10, '(')), 0);  // 1,024 stacks
  EXPECT_FALSE(a.overflowed());
  EXPECT_EQ(a.walk(a.start(), std::string(14, '(')), kDeadState);  // 16,384 > 10,000
  EXPECT_TRUE(a.overflowed());
}

// Strings to compare on: random ones over the alphabet, and random walks
// through the automaton (mostly sentences).
std::vector<std::string> probe_strings(const GrammarAutomaton& a,
                                       const std::vector<std::string>& alphabet,
                                       std::mt19937_64& rng, int n_random, int n_walks,
                                       int max_len) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::string> out;
  for (int i = 0; i < n_random; ++i) {
    std::string s;
    const size_t len = pick(static_cast<size_t>(max_len) / 3 + 1);
    for (size_t k = 0; k < len; ++k) s += alphabet[pick(alphabet.size())];
    out.push_back(s);
  }
  for (int i = 0; i < n_walks; ++i) {
    std::string s;
    int32_t st = a.start();
    for (int k = 0; k < max_len; ++k) {
      if (a.accepting(st) && pick(4) == 0) break;
      std::vector<std::pair<const std::string*, int32_t>> next;
      for (const auto& c : alphabet)
        if (const int32_t t = a.walk(st, c); t >= 0) next.emplace_back(&c, t);
      if (next.empty()) break;
      const auto& [c, t] = next[pick(next.size())];
      s += *c;
      st = t;
    }
    out.push_back(s);
    // A near miss: one character changed, dropped or added.
    std::string m = s;
    const size_t at = m.empty() ? 0 : pick(m.size());
    switch (pick(3)) {
      case 0:
        if (!m.empty()) m.erase(at, 1);
        break;
      case 1:
        m.insert(at, alphabet[pick(alphabet.size())]);
        break;
      default:
        if (!m.empty()) m[at] = alphabet[pick(alphabet.size())][0];
    }
    // Only whole UTF-8 strings go to Python.
    bool valid = true;
    for (size_t k = 0; k < m.size();) {
      const auto b = static_cast<unsigned char>(m[k]);
      const size_t len = b < 0x80         ? 1
                         : (b >> 5) == 6  ? 2
                         : (b >> 4) == 14 ? 3
                         : (b >> 3) == 30 ? 4
                                          : 0;
      if (len == 0 || k + len > m.size()) {
        valid = false;
        break;
      }
      for (size_t j = 1; j < len; ++j)
        if ((static_cast<unsigned char>(m[k + j]) & 0xC0) != 0x80) valid = false;
      k += len;
    }
    if (valid) out.push_back(m);
  }
  return out;
}

int run_compare(const std::string& path, std::string* report) {
  const std::string cmd = "python3 '" + std::string(PAGODA_SOURCE_DIR) +
                          "/tests/support/compare_grammar.py' '" + path + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) *report += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(GrammarAutomaton, AgreesWithPythonReOnThreeHundredRandomGrammars) {
  testing_guided::GrammarRegexGenerator gen(20261202);
  std::mt19937_64 rng(7);
  const std::string path = std::string(PAGODA_BINARY_DIR) + "/guided_grammar_regex.jsonl";
  int64_t accepted = 0, lines = 0;
  {
    std::ofstream out(path);
    for (int i = 0; i < 300; ++i) {
      auto [grammar, re] = gen.next();
      SCOPED_TRACE(grammar);
      std::unique_ptr<GrammarAutomaton> a;
      try {
        a = std::make_unique<GrammarAutomaton>(parse_ebnf(grammar));
      } catch (const GrammarError& e) {
        FAIL() << "grammar " << i << " did not compile: " << e.what() << "\n" << grammar;
      }
      for (const auto& s :
           probe_strings(*a, testing_guided::GrammarRegexGenerator::alphabet(), rng, 60, 40, 12)) {
        const bool ours = accepts(*a, s);
        accepted += ours;
        ++lines;
        out << nlohmann::json{{"kind", "regex"}, {"spec", re}, {"text", s}, {"ours", ours}}.dump()
            << "\n";
      }
    }
  }
  std::string report;
  EXPECT_EQ(run_compare(path, &report), 0) << report;
  std::printf("%s", report.c_str());
  EXPECT_GT(accepted, lines / 5);  // the walks make many sentences
}

TEST(GrammarAutomaton, JsonGrammarAgreesWithPythonJson) {
  GrammarAutomaton a(parse_ebnf(kJsonGrammar));
  const std::vector<std::string> alphabet = {"{", "}", "[", "]", "\"", ",", ":",  "0", "1", "9",
                                             "-", "+", ".", "e", "E",  " ", "\n", "t", "r", "u",
                                             "e", "f", "a", "l", "s",  "n", "\\", "b", "é", "\x01"};
  std::mt19937_64 rng(11);
  const std::string path = std::string(PAGODA_BINARY_DIR) + "/guided_grammar_json.jsonl";
  std::vector<std::string> texts = probe_strings(a, alphabet, rng, 500, 1500, 40);
  for (const char* s :
       {"{\"a\": [1, 2.5e3, \"x\\u00e9\\n\", {\"k\": null}], \"b\": true}", " [] ", "-0.0e+1", "01",
        "1.", ".5", "[1,]", "{\"a\"}", "\"\\x\"", "NaN", "\"a\x01\"", "[\"\\ud800\"]", "\t3\r\n"})
    texts.push_back(s);
  int64_t accepted = 0;
  {
    std::ofstream out(path);
    for (const auto& s : texts) {
      const bool ours = accepts(a, s);
      accepted += ours;
      out << nlohmann::json{{"kind", "json"}, {"spec", "json"}, {"text", s}, {"ours", ours}}.dump()
          << "\n";
    }
  }
  std::string report;
  EXPECT_EQ(run_compare(path, &report), 0) << report;
  std::printf("%s", report.c_str());
  EXPECT_GT(accepted, 300);
  EXPECT_LT(accepted, static_cast<int64_t>(texts.size()) - 300);
}

std::shared_ptr<const Tokenizer> qwen2() {
  static std::shared_ptr<const Tokenizer> tok =
      load_tokenizer(std::string(PAGODA_SHARED_DIR) + "/tokenizers/qwen2");
  return tok;
}

// Every token in a state's mask advances to a live state; every other
// token with text dies (brute force over the whole vocabulary).
TEST(GrammarGuide, MasksMatchBruteForce) {
  auto vocab = TokenVocab::of(qwen2());
  const GuideSpec spec{GuideKind::kGrammar, kJsonGrammar};
  auto guide = compile_guide(spec, vocab);
  EXPECT_EQ(compile_guide(spec, vocab), guide);  // cached
  for (const char* step : {"", "{", "{\"name\": \"ab", "[1, {\"n\": 4", "[[[[", "\"\\u00"}) {
    const int32_t state = guide->walk(guide->start(), step);
    ASSERT_GE(state, 0) << step;
    const TokenMask& mask = guide->mask(state);
    int64_t count = 0;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const bool live = !vocab->bytes(id).empty() && guide->advance(state, id) >= 0;
      ASSERT_EQ(mask.test(id), live)
          << "step '" << step << "' token " << id << " '" << vocab->bytes(id) << "'";
      count += live;
    }
    EXPECT_EQ(mask.count, count);
    EXPECT_GT(count, 0);
  }
  EXPECT_TRUE(guide->matches("{\"a\": [1, 2]}"));
  EXPECT_FALSE(guide->matches("{\"a\": [1, 2]"));
  EXPECT_EQ(guide->max_output_bytes(), -1);
  EXPECT_THROW(compile_guide(GuideSpec{GuideKind::kGrammar, "root ::= nope"}, vocab), GrammarError);
}

}  // namespace
}  // namespace pagoda::guided
