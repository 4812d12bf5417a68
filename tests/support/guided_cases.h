// Seeded generator of guided-decoding test cases (JSON schemas, regexes,
// choice lists) for the acceptance tests, and the check of their outputs by
// independent validators: tests/support/validate_guided.py (Python's
// jsonschema with its FormatChecker, and re.fullmatch). Every generated
// constraint is bounded (strings, arrays, numbers and repetitions have
// upper bounds) so a random model must finish within the case's max_tokens.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace pagoda::testing_guided {

struct GuidedCase {
  std::string kind;       // "json", "regex", "choice"
  nlohmann::json spec;    // the schema, the pattern, or the list of choices
  nlohmann::json fields;  // request fields carrying it
};

class CaseGenerator {
 public:
  explicit CaseGenerator(uint64_t seed) : rng_(seed) {}

  // Case i of a run: mostly schemas (every 5th a regex, every 10th a choice
  // list; json_object is unbounded, so not here), the schemas
  // alternating between guided_json, response_format json_schema and
  // structured_outputs.json.
  GuidedCase next(int i) {
    GuidedCase c;
    if (i % 10 == 9) {
      c.kind = "choice";
      std::vector<std::string> choices;
      const int n = 1 + pick(4);
      for (int k = 0; k < n; ++k) {
        std::string choice = word(1 + pick(6));
        if (pick(2)) choice += " " + word(1 + pick(4));
        choices.push_back(std::move(choice));
      }
      c.spec = choices;
      c.fields = {{"guided_choice", choices}};
    } else if (i % 5 == 4) {
      c.kind = "regex";
      c.spec = regex(0);
      c.fields = pick(2) ? nlohmann::json{{"guided_regex", c.spec}}
                         : nlohmann::json{{"structured_outputs", {{"regex", c.spec}}}};
    } else {
      c.kind = "json";
      c.spec = schema(0);
      switch (i % 3) {
        case 0:
          c.fields = {{"guided_json", c.spec}};
          break;
        case 1:
          c.fields = {{"response_format",
                       {{"type", "json_schema"},
                        {"json_schema", {{"name", "s"}, {"strict", true}, {"schema", c.spec}}}}}};
          break;
        default:
          c.fields = {{"structured_outputs", {{"json", c.spec}}}};
      }
    }
    return c;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  std::string word(int len) {
    std::string w;
    for (int k = 0; k < len; ++k) w += "abcdefghijklmnopqrstuvwxyz"[pick(26)];
    return w;
  }

  nlohmann::json leaf() {
    switch (pick(11)) {
      case 0: {
        int lo = pick(3);
        return {{"type", "string"}, {"minLength", lo}, {"maxLength", lo + pick(8)}};
      }
      case 1: {
        int lo = pick(200) - 100;
        return {{"type", "integer"}, {"minimum", lo}, {"maximum", lo + pick(1000)}};
      }
      case 2: {
        int lo = pick(20) - 10;
        return {{"type", "number"}, {"minimum", lo}, {"maximum", lo + 1 + pick(50)}};
      }
      case 3:
        return {{"type", "boolean"}};
      case 4:
        return {{"type", "null"}};
      case 5:
        return {{"enum", {word(3), pick(100), nullptr, true, word(5) + " x"}}};
      case 6:
        return {{"const", word(4)}};
      case 7:
        return {{"type", "string"}, {"format", pick(2) ? "date" : "uuid"}};
      case 8: {
        static const char* kBounded[] = {"^[a-z]{2,5}$", "^\\d{3}-\\d{4}$", "^(ab|cd){1,3}x?$"};
        return {{"type", "string"}, {"pattern", kBounded[pick(3)]}};
      }
      case 9:
        return {{"type", {"integer", "null"}}, {"minimum", 0}, {"maximum", 50}};
      default:
        return {{"anyOf",
                 {{{"type", "string"}, {"maxLength", 3}},
                  {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}}}};
    }
  }

  nlohmann::json schema(int depth) {
    const int k = depth >= 2 ? 0 : pick(10);
    if (k < 4) return leaf();
    if (k < 7) {  // object
      nlohmann::json props = nlohmann::json::object(), req = nlohmann::json::array();
      const int n = 1 + pick(4);
      for (int p = 0; p < n; ++p) {
        const std::string name = word(1 + pick(5)) + std::to_string(p);
        props[name] = schema(depth + 1);
        if (pick(2)) req.push_back(name);
      }
      nlohmann::json o = {{"type", "object"}, {"properties", props}, {"required", req}};
      if (pick(2)) o["additionalProperties"] = false;
      return o;
    }
    if (k < 9) {  // array
      const int lo = pick(3);
      return {{"type", "array"},
              {"items", schema(depth + 1)},
              {"minItems", lo},
              {"maxItems", lo + pick(3)}};
    }
    // $defs + $ref ("#/$defs/..." resolves against the root: top level only)
    if (depth > 0) return leaf();
    return {
        {"$defs", {{"item", leaf()}}},
        {"type", "object"},
        {"properties",
         {{"first", {{"$ref", "#/$defs/item"}}},
          {"rest", {{"type", "array"}, {"items", {{"$ref", "#/$defs/item"}}}, {"maxItems", 2}}}}},
        {"required", {"first"}}};
  }

  // Bounded regexes (no * or +): literals, classes, escapes, groups,
  // alternation, {m,n}.
  std::string regex(int depth) {
    switch (depth >= 3 ? pick(6) : pick(10)) {
      case 0:
        return word(1 + pick(3));
      case 1:
        return "[a-f0-9]";
      case 2:
        return "\\d";
      case 3:
        return "\\w";
      case 4:
        return "[^ \"]";
      case 5:
        return "[A-Z]";
      // Each draw in its own statement: the operands of + are evaluated in
      // an unspecified order (GCC and clang differ), and the cases must be
      // the same under every compiler.
      case 6: {
        std::string a = regex(depth + 1);
        return a + regex(depth + 1);
      }
      case 7: {
        std::string a = regex(depth + 1);
        return "(" + a + "|" + regex(depth + 1) + ")";
      }
      case 8:
        return "(?:" + regex(depth + 1) + ")?";
      default: {
        const int lo = pick(3);
        std::string a = regex(depth + 1);
        return "(?:" + a + "){" + std::to_string(lo) + "," + std::to_string(lo + pick(4)) + "}";
      }
    }
  }

  std::mt19937_64 rng_;
};

// max_tokens for a case whose longest output is `bound` bytes, so that
// "length" can only mean the constraint did not end the output: each text
// token adds at least one byte, and an output that can still grow has fewer
// than `bound` bytes, so its EOS comes by token `bound`; an output of
// exactly `bound` bytes ends without EOS (nothing can follow). A pattern
// that matches only "" (bound 0) still samples one token, the EOS, and
// vLLM's check_stop tests length before EOS: max_tokens 1 would end it
// "length", hence at least 2.
inline int64_t max_tokens_for_bound(int64_t bound) { return std::max<int64_t>(bound, 1) + 1; }

// Writes one JSON line per output ({"kind", "spec", "text"}) to `path`,
// then runs the Python validator over it; returns its exit status (0: every
// output parses and validates) and appends its report to *report.
inline int validate_with_python(const std::vector<GuidedCase>& cases,
                                const std::vector<std::string>& texts, const std::string& path,
                                const std::string& script, std::string* report) {
  {
    std::ofstream out(path);
    for (size_t i = 0; i < cases.size(); ++i)
      out << nlohmann::json{{"kind", cases[i].kind}, {"spec", cases[i].spec}, {"text", texts[i]}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
  }
  const std::string cmd = "python3 '" + script + "' '" + path + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) *report += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace pagoda::testing_guided
