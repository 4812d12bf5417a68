// parse_json_fast_path (server/json_fast_path.h) against nlohmann's own
// parser, the reference parse_strict_json falls back to: whatever the fast
// path accepts, nlohmann must accept with the same value, number types
// included (unsigned / integer / float); what it declines falls back, so
// declining is always safe, accepting something nlohmann refuses never is.
#include "server/json_fast_path.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "server/strict_json.h"
#include "tests/support/json_same.h"

namespace pagoda {
namespace {

using nlohmann::json;

// The fast path either declines or agrees with nlohmann's strict parse.
void expect_agrees(const std::string& text) {
  const std::optional<json> fast = parse_json_fast_path(text, kMaxJsonDepth);
  if (!fast) return;
  const json ref = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(ref.is_discarded()) << "fast path accepted what nlohmann refuses: " << text;
  EXPECT_TRUE(test::json_same(*fast, ref)) << text << "\nfast: " << fast->dump() << "\nref:  " << ref.dump();
}

void expect_accepted(const std::string& text) {
  const std::optional<json> fast = parse_json_fast_path(text, kMaxJsonDepth);
  ASSERT_TRUE(fast.has_value()) << text;
  EXPECT_TRUE(test::json_same(*fast, json::parse(text))) << text;
}

const std::vector<std::string> kSeeds = {
    R"({"prompt":"Once upon a time","max_tokens":16,"temperature":0.7,"stream":false})",
    R"({"messages":[{"role":"user","content":"h\u00e9llo \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t"}]})",
    R"([1,-1,0,-0,18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809])",
    R"([1.5,-2.25e-3,1E10,1e+2,0.0,-0.0,123456789012345678901234567890,1e308,4.9e-324])",
    R"({"a":{"b":[true,false,null,{}]},"c":[],"d":"","e":"\u0000x"})",
    "  \t\r\n{ \"k\" : [ 1 , 2 ] }  \n",
    "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF\"",
    R"({"prompt":[[1,2,3],[4,5]],"logit_bias":{"50256":-100}})",
};

TEST(JsonFastPath, AcceptsWellFormedTextWithNlohmannsValues) {
  for (const std::string& s : kSeeds) expect_accepted(s);
}

TEST(JsonFastPath, DeclinesWhatTheStrictParserRefusesOrHandlesItself) {
  const std::vector<std::string> declined = {
      "",
      " ",
      R"({"a":1,"a":2})",  // a duplicate name: the strict parser words it
      R"({"a":1e999})",    // beyond double range: 400 naming 'a'
      R"([1e-400])",       // underflow: left to strtod
      "\xEF\xBB\xBF{}",    // a BOM: nlohmann skips it
      R"({"a":1,})",
      R"([01])",
      R"([1.])",
      R"([.5])",
      R"([-])",
      R"(["\ud800"])",
      R"(["\udc00"])",
      R"(["\ud800\u0041"])",
      R"(["\x"])",
      "[\"a\x01\"]",
      "[\"\xC0\xAF\"]",          // overlong
      "[\"\xED\xA0\x80\"]",      // a surrogate in UTF-8
      "[\"\xF4\x90\x80\x80\"]",  // beyond U+10FFFF
      "[\"\xE2\x82\"]",          // truncated
      "[\"abc",
      "{} {}",
      "tru",
      "nul",
      "[true false]",
  };
  for (const std::string& s : declined) {
    EXPECT_FALSE(parse_json_fast_path(s, kMaxJsonDepth).has_value()) << s;
    expect_agrees(s);
  }
}

TEST(JsonFastPath, NestingBeyondTheLimitIsDeclined) {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_TRUE(parse_json_fast_path(nested(kMaxJsonDepth), kMaxJsonDepth).has_value());
  EXPECT_FALSE(parse_json_fast_path(nested(kMaxJsonDepth + 1), kMaxJsonDepth).has_value());
}

TEST(JsonFastPath, LongStringsWithEveryByteClassAtEveryAlignment) {
  // The 8-byte scan must stop at a special byte wherever it falls.
  const std::vector<std::string> specials = {"\\n", "\\\"", "\xC3\xA9", "\x01", "\"", "\x7F"};
  for (const std::string& sp : specials)
    for (size_t at = 0; at < 24; ++at) {
      std::string body(40, 'a');
      body.insert(at, sp);
      expect_agrees("\"" + body + "\"");
      expect_agrees("{\"k\":\"" + body + "\"}");
    }
  const std::string big(1u << 20, 'x');
  const std::optional<json> fast = parse_json_fast_path("[\"" + big + "\"]", kMaxJsonDepth);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ((*fast)[0].get_ref<const std::string&>(), big);
}

TEST(JsonFastPath, RandomMutationsNeverAcceptWhatNlohmannRefuses) {
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[],:\"\\/ -+.eE0129aeflnrstu\x01\x7F\xC3\xA9\xED\xF0\x9F\x80";
#ifdef PAGODA_SANITIZE
  constexpr int kRounds = 20000;
#else
  constexpr int kRounds = 200000;
#endif
  for (int i = 0; i < kRounds; ++i) {
    std::string s = kSeeds[rng() % kSeeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s[at] = c;
          break;
        case 1:
          s.insert(at, 1, c);
          break;
        default:
          s.erase(at, 1);
      }
    }
    expect_agrees(s);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(JsonFastPath, StrictParserGivesTheSameResultsThroughIt) {
  // parse_strict_json takes the fast path first: its errors are unchanged.
  auto parsed = parse_strict_json(R"({"a":1,"a":2})", "Request body");
  ASSERT_TRUE(std::holds_alternative<JsonParseFailure>(parsed));
  EXPECT_EQ(std::get<JsonParseFailure>(parsed).message,
            "Request body has the key 'a' twice in one JSON object (each key may appear once)");
  parsed = parse_strict_json(R"({"x":{"y":1e999}})", "Request body");
  ASSERT_TRUE(std::holds_alternative<JsonParseFailure>(parsed));
  EXPECT_EQ(std::get<JsonParseFailure>(parsed).param, "x");
  parsed = parse_strict_json("\xEF\xBB\xBF{\"a\":[1e-400]}", "Request body");
  ASSERT_TRUE(std::holds_alternative<json>(parsed));
  EXPECT_EQ(std::get<json>(parsed)["a"][0].get<double>(), 0.0);
}

}  // namespace
}  // namespace pagoda
