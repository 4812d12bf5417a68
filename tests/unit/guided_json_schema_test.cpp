// engine/guided/json_schema_regex.h and guide.h: schemas compile to
// patterns that accept valid documents and reject invalid ones; integer
// ranges are exact; token masks agree with a brute-force walk of the
// vocabulary (Qwen2's byte-level BPE).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/json_schema_regex.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda::guided {
namespace {

using nlohmann::json;

ByteDfa schema_dfa(const std::string& schema, std::string_view ws = kDefaultWhitespace) {
  return ByteDfa::compile(json_schema_to_regex(schema, ws));
}

TEST(GuidedJsonSchema, IntegerRangesAreExact) {
  const long long bounds[][2] = {{0, 0},     {0, 9},     {3, 47}, {-15, 15},
                                 {-120, -7}, {95, 1005}, {-1, 0}, {7, 7}};
  for (auto [lo, hi] : bounds) {
    ByteDfa d = ByteDfa::compile(integer_range_regex(lo, hi));
    for (long long v = -1200; v <= 1200; ++v)
      ASSERT_EQ(d.matches(std::to_string(v)), v >= lo && v <= hi)
          << lo << ".." << hi << " at " << v;
    EXPECT_FALSE(d.matches("-0"));
    EXPECT_FALSE(d.matches("007"));
  }
}

TEST(GuidedJsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  ByteDfa d = schema_dfa(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":3},"c":{"type":"boolean"}},"required":["b"]})");
  EXPECT_TRUE(d.matches(R"({"a": 1, "b": "xy", "c": true})"));
  EXPECT_TRUE(d.matches(R"({"b":"", "c":false})"));
  EXPECT_TRUE(d.matches(R"({"b":"abc"})"));
  EXPECT_FALSE(d.matches(R"({"a": 1})"));           // b required
  EXPECT_FALSE(d.matches(R"({"b":"abcd"})"));       // maxLength
  EXPECT_FALSE(d.matches(R"({"b":"a", "a": 1})"));  // schema order
  EXPECT_FALSE(d.matches(R"({"b":"a",})"));
}

// The generated object's keys come in the schema's "properties" order, as
// vLLM's backends (xgrammar, outlines) emit them, not sorted.
// A required property missing from `properties` takes additionalProperties'
// schema (any value when they are open); in anyOf, a branch that requires
// one while closed is dropped, not the whole schema.
TEST(GuidedJsonSchema, RequiredPropertiesOutsidePropertiesFollowAdditionalProperties) {
  ByteDfa typed =
      schema_dfa(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"],)"
                 R"("additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(typed.matches(R"({"b": 5})"));
  EXPECT_TRUE(typed.matches(R"({"a": "x", "b": 5})"));
  EXPECT_FALSE(typed.matches(R"({"b": "s"})"));
  EXPECT_FALSE(typed.matches(R"({"a": "x"})"));
  ByteDfa open =
      schema_dfa(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"]})");
  EXPECT_TRUE(open.matches(R"({"b": [1]})"));
  ByteDfa any_of = schema_dfa(
      R"({"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["b"],)"
      R"("additionalProperties":false},{"type":"integer"}]})");
  EXPECT_TRUE(any_of.matches("7"));
  EXPECT_FALSE(any_of.matches(R"({"b": 1})"));
  // disable_additional_properties (tools' parameters) keeps a schema's own
  // required key allowed.
  ByteDfa tools = ByteDfa::compile(json_schema_to_regex(
      R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"]})",
      kDefaultWhitespace, true));
  EXPECT_TRUE(tools.matches(R"({"b": 1})"));
}

TEST(GuidedJsonSchema, PropertiesComeInTheSchemasOrder) {
  ByteDfa d = schema_dfa(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"boolean"},)"
      R"("mid":{"type":"string"}},"required":["zeta","alpha","mid"]})");
  EXPECT_TRUE(d.matches(R"({"zeta": 1, "alpha": true, "mid": "m"})"));
  EXPECT_FALSE(d.matches(R"({"alpha": true, "mid": "m", "zeta": 1})"));  // sorted
  EXPECT_FALSE(d.matches(R"({"alpha": true, "zeta": 1, "mid": "m"})"));
}

TEST(GuidedJsonSchema, ArraysEnumsRefsAnyOf) {
  ByteDfa arr =
      schema_dfa(R"({"type":"array","items":{"enum":["x",1,null]},"minItems":1,"maxItems":2})");
  EXPECT_TRUE(arr.matches(R"(["x"])"));
  EXPECT_TRUE(arr.matches(R"([1, null])"));
  EXPECT_FALSE(arr.matches(R"([])"));
  EXPECT_FALSE(arr.matches(R"([1,1,1])"));
  EXPECT_FALSE(arr.matches(R"(["y"])"));
  ByteDfa ref = schema_dfa(
      R"({"$defs":{"p":{"type":"object","properties":{"n":{"const":"k"}},"required":["n"]}},"anyOf":[{"$ref":"#/$defs/p"},{"type":"null"}]})");
  EXPECT_TRUE(ref.matches(R"({"n": "k"})"));
  EXPECT_TRUE(ref.matches("null"));
  EXPECT_FALSE(ref.matches(R"({"n": "j"})"));
  // Recursive $ref: a bounded-depth expansion.
  ByteDfa tree = schema_dfa(
      R"({"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#"},"maxItems":2}},"required":["v"]})");
  EXPECT_TRUE(tree.matches(R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
  EXPECT_FALSE(tree.matches(R"({"v": 10})"));
}

TEST(GuidedJsonSchema, NumbersStringsFormatsWhitespace) {
  ByteDfa num = schema_dfa(R"({"type":"number","minimum":-2.5,"maximum":3})");
  for (const char* ok : {"-2", "0", "3", "2.75", "-1.5", "0.001", "3.0"})
    EXPECT_TRUE(num.matches(ok)) << ok;
  for (const char* bad : {"4", "-3", "3.5", "1e2", "-2.9"}) EXPECT_FALSE(num.matches(bad)) << bad;
  ByteDfa s = schema_dfa(R"({"type":"string","pattern":"^[a-z]{2}\\d$"})");
  EXPECT_TRUE(s.matches(R"("ab1")"));
  EXPECT_FALSE(s.matches(R"("ab")"));
  ByteDfa unanchored = schema_dfa(R"({"type":"string","pattern":"q"})");
  EXPECT_TRUE(unanchored.matches(R"("xxqyy")"));
  ByteDfa date = schema_dfa(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(date.matches(R"("2024-02-28")"));
  EXPECT_FALSE(date.matches(R"("2024-13-01")"));
  ByteDfa esc = schema_dfa(R"({"type":"string"})");
  EXPECT_TRUE(esc.matches(R"("a\"b\\c\n")"));
  EXPECT_FALSE(esc.matches("\"a\nb\""));  // a raw control character is not JSON
  ByteDfa ws = schema_dfa(
      R"({"type":"object","properties":{"a":{"type":"null"}},"required":["a"]})", "[\\n ]{0,2}");
  EXPECT_TRUE(ws.matches("{\n \"a\" : null\n}"));
  ByteDfa obj = ByteDfa::compile(json_object_regex(kDefaultWhitespace));
  EXPECT_TRUE(obj.matches(R"({"k": [1, {"z": "q"}], "t": true})"));
  EXPECT_FALSE(obj.matches(R"([1])"));
}

// An empty whitespace pattern allows no whitespace between JSON tokens
// (outlines' meaning of whitespace_pattern=""), in schemas, arrays and
// json_object alike; it is not the default pattern.
TEST(GuidedJsonSchema, EmptyWhitespacePatternAllowsNone) {
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array",)"
      R"("items":{"type":"boolean"}}},"required":["a","b"]})";
  ByteDfa tight = schema_dfa(schema, "");
  EXPECT_TRUE(tight.matches(R"({"a":1,"b":[true,false]})"));
  for (const char* spaced : {R"({"a": 1,"b":[true,false]})", R"({ "a":1,"b":[true,false]})",
                             R"({"a":1, "b":[true,false]})", R"({"a":1,"b":[true, false]})",
                             R"({"a":1,"b":[true,false] })"})
    EXPECT_FALSE(tight.matches(spaced)) << spaced;
  ByteDfa spaced_default = schema_dfa(schema);
  EXPECT_TRUE(spaced_default.matches(R"({"a": 1, "b": [true, false]})"));
  ByteDfa obj = ByteDfa::compile(json_object_regex(""));
  EXPECT_TRUE(obj.matches(R"({"k":[1,{"z":"q"}]})"));
  EXPECT_FALSE(obj.matches(R"({"k": [1]})"));
}

// Bounded numbers are exact: for random bounds (fractional, negative,
// inclusive or exclusive, one side absent) and random decimal strings, the
// pattern matches exactly the strings whose value is within the bounds,
// compared as scaled integers (no doubles).
TEST(GuidedJsonSchema, BoundedNumbersAreExact) {
  constexpr int kScale = 6;                          // values are multiples of 10^-6 here
  auto text_of = [](long long v, int frac_digits) {  // v in units of 10^-6
    const bool neg = v < 0;
    const unsigned long long a = static_cast<unsigned long long>(neg ? -v : v);
    std::string f = std::to_string(a % 1000000);
    f = std::string(6 - f.size(), '0') + f;
    std::string out = (neg ? "-" : "") + std::to_string(a / 1000000);
    while (!f.empty() && f.back() == '0') f.pop_back();
    if (frac_digits > static_cast<int>(f.size())) f.append(frac_digits - f.size(), '0');
    if (!f.empty()) out += "." + f;
    return out;
  };
  std::mt19937_64 rng(20240611);
  auto random_value = [&](int max_int) {
    const long long ip = static_cast<long long>(rng() % static_cast<unsigned>(max_int + 1));
    const int digits = static_cast<int>(rng() % 4);  // fraction digits 0..3
    long long frac = 0;
    for (int k = 0; k < digits; ++k) frac = frac * 10 + static_cast<long long>(rng() % 10);
    for (int k = digits; k < kScale; ++k) frac *= 10;
    const long long v = ip * 1000000 + frac;
    return rng() % 2 ? -v : v;
  };
  int checked = 0;
  for (int round = 0; round < 300; ++round) {
    const int max_int = round % 3 == 0 ? 2 : round % 3 == 1 ? 30 : 1200;
    long long a = random_value(max_int), b = random_value(max_int);
    if (a > b) std::swap(a, b);
    if (round % 7 == 0) b = a;  // equal bounds
    const bool has_lo = round % 11 != 5, has_hi = round % 13 != 6;
    const bool excl_lo = rng() % 2, excl_hi = rng() % 2;
    json schema = {{"type", "number"}};
    if (has_lo) schema[excl_lo ? "exclusiveMinimum" : "minimum"] = json::parse(text_of(a, 0));
    if (has_hi) schema[excl_hi ? "exclusiveMaximum" : "maximum"] = json::parse(text_of(b, 0));
    auto inside = [&](long long v) {
      return (!has_lo || (excl_lo ? v > a : v >= a)) && (!has_hi || (excl_hi ? v < b : v <= b));
    };
    std::string re;
    try {
      re = json_schema_to_regex(schema.dump(), kDefaultWhitespace);
    } catch (const SchemaError& e) {
      // Unsatisfiable: no value may be inside.
      EXPECT_NE(std::string(e.what()).find("no document"), std::string::npos) << e.what();
      EXPECT_TRUE(has_lo && has_hi && (b < a || (a == b && (excl_lo || excl_hi)))) << schema.dump();
      continue;
    }
    const ByteDfa d = ByteDfa::compile(re);
    EXPECT_LT(d.num_states(), 400u) << schema.dump();
    std::vector<long long> probes = {a, b, a - 1, a + 1, b - 1, b + 1, 0};
    for (int k = 0; k < 200; ++k) probes.push_back(random_value(max_int));
    for (int k = 0; k < 50; ++k)
      probes.push_back(a + static_cast<long long>(rng() % 2000001) - 1000000);
    for (long long v : probes)
      for (int extra : {0, 1, 4}) {  // trailing zeros do not change the value
        const std::string t = text_of(v, extra);
        ASSERT_EQ(d.matches(t), inside(v)) << schema.dump() << " on " << t;
        if (v == 0) {  // "-0" is 0, as JSON reads it
          ASSERT_EQ(d.matches("-" + t), inside(0)) << schema.dump() << " on -" << t;
        }
        ++checked;
      }
    EXPECT_EQ(d.matches("1e2"), !has_lo && !has_hi);  // bounded: no exponent
    EXPECT_FALSE(d.matches("01"));
    EXPECT_FALSE(d.matches("1."));
    EXPECT_FALSE(d.matches(".5"));
  }
  EXPECT_GT(checked, 100000);
}

// The tester's cases: [0, 1] has 0.37; fractional and exclusive bounds
// compile (they had been refused as unsatisfiable). At most 16 fraction
// digits (a model cannot write 0.3333... forever), more when a bound has
// more.
TEST(GuidedJsonSchema, FractionalNumberBounds) {
  struct Case {
    const char* schema;
    std::vector<std::string> accepted, refused;
  };
  const Case cases[] = {
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "1", "0.37", "0.999999", "1.000", "0.0", "0." + std::string(16, '3')},
       {"1.01", "-0.1", "2", "1e-1", "0." + std::string(17, '3'), "1." + std::string(17, '0')}},
      {R"({"type":"number","minimum":0.1,"maximum":0.9})",
       {"0.1", "0.5", "0.9000"},
       {"0.09", "0.90001"}},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
       {"0.5"},
       {"0", "0.000", "1"}},
      {R"({"type":"number","minimum":-2.5,"maximum":-2.25})", {"-2.3", "-2.5"}, {"-2.2"}},
      {R"({"type":"number","minimum":0.001,"maximum":0.002})", {"0.0015"}, {"0.0021"}},
      {R"({"type":"number","minimum":0.25,"maximum":0.25})", {"0.25", "0.2500"}, {"0.251"}},
      {R"({"type":"number","exclusiveMinimum":1e20})",
       {"100000000000000000000.5"},
       {"100000000000000000000"}},
      {R"({"type":"number","exclusiveMinimum":0,"maximum":1e-20})",
       {"0.00000000000000000001", "0.0000000000000000000050"},
       {"0.000000000000000000011"}},
      {R"({"type":"number","exclusiveMaximum":1e-5,"minimum":0})", {"0.000009"}, {"0.00001"}},
  };
  for (const Case& c : cases) {
    const ByteDfa d = schema_dfa(c.schema);
    for (const std::string& t : c.accepted) EXPECT_TRUE(d.matches(t)) << c.schema << " on " << t;
    for (const std::string& t : c.refused) EXPECT_FALSE(d.matches(t)) << c.schema << " on " << t;
  }
}

// JSON Schema patterns search (ECMA-262): "^abc" is "starts with abc",
// "xyz$" "ends with xyz", each top-level alternative with its own anchors.
// Half-anchored patterns had been refused with an offset into the internal
// wrapped regex; errors now give the offset in the schema's pattern and the
// schema path.
TEST(GuidedJsonSchema, PatternAnchorsArePerSide) {
  auto str = [](const std::string& pattern) {
    return schema_dfa(json{{"type", "string"}, {"pattern", pattern}}.dump());
  };
  ByteDfa head = str("^abc");
  EXPECT_TRUE(head.matches(R"("abc")"));
  EXPECT_TRUE(head.matches(R"("abcdef")"));
  EXPECT_FALSE(head.matches(R"("xabc")"));
  ByteDfa tail = str("xyz$");
  EXPECT_TRUE(tail.matches(R"("xyz")"));
  EXPECT_TRUE(tail.matches(R"("wxyz")"));
  EXPECT_FALSE(tail.matches(R"("xyzw")"));
  ByteDfa plus = str("^(a|b)+");
  EXPECT_TRUE(plus.matches(R"("abz")"));
  EXPECT_FALSE(plus.matches(R"("zab")"));
  ByteDfa digits = str("\\d{3}$");
  EXPECT_TRUE(digits.matches(R"("id-123")"));
  EXPECT_FALSE(digits.matches(R"("123-id")"));
  ByteDfa both = str("^a|b$");  // starts with a, or ends with b
  EXPECT_TRUE(both.matches(R"("ax")"));
  EXPECT_TRUE(both.matches(R"("xb")"));
  EXPECT_FALSE(both.matches(R"("xa")"));
  ByteDfa literal_dollar = str("^a\\$");  // an escaped '$' is a character
  EXPECT_TRUE(literal_dollar.matches(R"("a$")"));
  EXPECT_TRUE(literal_dollar.matches(R"("a$x")"));
  EXPECT_FALSE(literal_dollar.matches(R"("a")"));
  ByteDfa full = str("^[a-z]{2}$");
  EXPECT_TRUE(full.matches(R"("ab")"));
  EXPECT_FALSE(full.matches(R"("abc")"));
  auto err = [](const std::string& schema) {
    try {
      json_schema_to_regex(schema, kDefaultWhitespace);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string e =
      err(R"({"type":"object","properties":{"code":{"type":"string","pattern":"^ab(c"}}})");
  EXPECT_NE(e.find("#/properties/code"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid regex at offset 5: missing ')'"), std::string::npos) << e;
  const std::string mid = err(R"({"type":"string","pattern":"xy|a^b"})");
  EXPECT_NE(mid.find("invalid regex at offset 4: '^' inside the pattern"), std::string::npos)
      << mid;
}

TEST(GuidedJsonSchema, UnsupportedAndInvalidSchemasAreErrors) {
  auto err = [](const std::string& schema) {
    try {
      json_schema_to_regex(schema, kDefaultWhitespace);
    } catch (const SchemaError& e) {
      return std::string(e.what());
    } catch (const RegexError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(err(R"({"not":{}})").find("'not'"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"(a"})").find("'pattern'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"^a\"$"})").find("escaped"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","format":"email"})").find("format 'email'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":1})").find("no document"),
            std::string::npos);
  // A required property that `properties` does not list is an additional
  // one: with additionalProperties false no document has it.
  EXPECT_NE(err(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"],)"
                R"("additionalProperties":false})")
                .find("no document"),
            std::string::npos);
  // Optional properties nested deep repeat their patterns: a bound, not a stall.
  std::string deep = R"({"type":"string"})";
  for (int level = 0; level < 4; ++level) {
    std::string props;
    for (int p = 0; p < 8; ++p)
      props.append(p ? "," : "").append("\"p").append(std::to_string(p)).append("\":").append(deep);
    std::string next = R"({"type":"object","properties":{)";
    next.append(props).append("}}");
    deep = std::move(next);
  }
  EXPECT_NE(err(deep).find("too complex"), std::string::npos);
}

std::shared_ptr<const Tokenizer> qwen2() {
  static std::shared_ptr<const Tokenizer> tok =
      load_tokenizer(std::string(PAGODA_SHARED_DIR) + "/tokenizers/qwen2");
  return tok;
}

TEST(GuidedTokenVocab, ByteStrings) {
  auto tok = qwen2();
  for (const char* text : {"hello world", " {\"a\": 1}", "中文\n"}) {
    std::string joined;
    for (int32_t id : tok->encode(text, false)) joined += token_byte_string(*tok, id);
    EXPECT_EQ(joined, text);
  }
  EXPECT_EQ(token_byte_string(*tok, *tok->eos_token_id()), "");  // special: no text
}

// Every token in a state's mask advances to a live state; every other
// token with text dies (brute force over the whole vocabulary).
TEST(GuidedTokenVocab, MasksMatchBruteForce) {
  auto vocab = TokenVocab::of(qwen2());
  GuideSpec spec{
      GuideKind::kJson,
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},"n":{"type":"integer","minimum":0,"maximum":99}},"required":["name","n"]})"};
  auto guide = compile_guide(spec, vocab);
  EXPECT_EQ(compile_guide(spec, vocab), guide);  // cached
  int32_t s = guide->start();
  for (const char* step : {"", "{", "{\"name\": \"ab", "{\"name\": \"abcd\", \"n\": 4"}) {
    const int32_t state = guide->walk(s, step);
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
  EXPECT_THROW(compile_guide(GuideSpec{GuideKind::kRegex, "(a"}, vocab), RegexError);
  auto choice = compile_guide(GuideSpec{GuideKind::kChoice, R"(["yes","no","maybe so"])"}, vocab);
  EXPECT_TRUE(choice->matches("maybe so"));
  EXPECT_FALSE(choice->matches("yesno"));
}

}  // namespace
}  // namespace pagoda::guided
