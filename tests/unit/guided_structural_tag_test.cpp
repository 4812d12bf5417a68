// engine/guided/structural_tag.h: vLLM's structural_tag (xgrammar's
// from_structural_tag semantics) as one byte DFA: free text without
// triggers; a trigger continues with one of its structures' begin, a JSON
// value valid for that structure's schema, then its end; free text again.
// Checked: strings accepted / rejected, overlapping and shared triggers,
// the validation errors (each naming the field), and the guide over a real
// vocabulary (masks, EOS, can_continue).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "engine/guided/guide.h"
#include "engine/guided/json_schema_regex.h"
#include "engine/guided/structural_tag.h"
#include "engine/guided/token_vocab.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::guided {
namespace {

using nlohmann::json;

json weather_schema() {
  return {{"type", "object"},
          {"properties",
           {{"city", {{"type", "string"}, {"maxLength", 20}}}, {"unit", {{"enum", {"c", "f"}}}}}},
          {"required", {"city"}}};
}

json function_tag() {
  return {
      {"type", "structural_tag"},
      {"structures",
       {{{"begin", "<function=get_weather>"}, {"schema", weather_schema()}, {"end", "</function>"}},
        {{"begin", "<function=get_time>"},
         {"schema",
          {{"type", "object"},
           {"properties", {{"tz", {{"type", "string"}}}}},
           {"required", {"tz"}}}},
         {"end", "</function>"}},
        {{"begin", "<n>"}, {"schema", {{"type", "integer"}}}, {"end", "</n>"}}}},
      {"triggers", {"<function=", "<n>"}}};
}

ByteDfa dfa_of(const json& tag) {
  return structural_tag_dfa(parse_structural_tag(tag), kDefaultWhitespace);
}

TEST(GuidedStructuralTag, FreeTextAndPartialTriggersAccept) {
  const ByteDfa d = dfa_of(function_tag());
  EXPECT_TRUE(d.matches(""));
  EXPECT_TRUE(d.matches("Hello, world.\n"));
  EXPECT_TRUE(d.matches("a < b and <fun"));  // a trigger prefix may end the output
  EXPECT_TRUE(d.matches("<function"));
  EXPECT_TRUE(d.matches("\xff\xfe raw bytes"));  // free text is any bytes
  EXPECT_TRUE(d.accepting(d.start()));
  EXPECT_EQ(d.max_match_length(), -1);
}

TEST(GuidedStructuralTag, TriggerThenBeginJsonEnd) {
  const ByteDfa d = dfa_of(function_tag());
  EXPECT_TRUE(d.matches(R"(<function=get_weather>{"city": "Paris"}</function>)"));
  EXPECT_TRUE(
      d.matches(R"(Let me look.<function=get_weather>{"city": "Oslo", "unit": "c"}</function>)"));
  // Two structures sharing one trigger, text after the end, repeats.
  EXPECT_TRUE(d.matches(
      R"(a<function=get_time>{"tz": "UTC"}</function> then <function=get_weather>{"city": "X"}</function> done <n>42</n>!)"));
  EXPECT_TRUE(d.matches("<n>-7</n><n>0</n>"));  // a begin that is its trigger exactly
  // The scanner restarts inside an overlap ("<" then "<function=").
  EXPECT_TRUE(d.matches(R"(x<<function=get_time>{"tz": "a"}</function>)"));
}

TEST(GuidedStructuralTag, WhatFollowsATriggerIsConstrained) {
  const ByteDfa d = dfa_of(function_tag());
  // A trigger followed by no structure's begin.
  EXPECT_EQ(d.walk(d.start(), "<function=foo"), ByteDfa::kDead);
  EXPECT_EQ(d.walk(d.start(), "<n>x"), ByteDfa::kDead);
  EXPECT_EQ(d.walk(d.start(), "text <function= get_weather>"), ByteDfa::kDead);
  // JSON that violates the schema: a missing required key, a wrong type, an
  // enum value not listed, a string over maxLength, not JSON at all.
  EXPECT_FALSE(d.matches(R"(<function=get_weather>{"unit": "c"}</function>)"));
  EXPECT_FALSE(d.matches(R"(<function=get_weather>{"city": 5}</function>)"));
  EXPECT_FALSE(d.matches(R"(<function=get_weather>{"city": "a", "unit": "k"}</function>)"));
  EXPECT_FALSE(d.matches(R"(<function=get_weather>{"city": "aaaaaaaaaaaaaaaaaaaaa"}</function>)"));
  EXPECT_FALSE(d.matches(R"(<function=get_time>{"city": "Paris"}</function>)"));  // other schema
  EXPECT_FALSE(d.matches("<n>1.5</n>"));
  EXPECT_FALSE(d.matches("<n>hello</n>"));
  // Unterminated structures are live but do not accept (no EOS there).
  for (const char* s :
       {"<function=", "<function=get_weather>", R"(<function=get_weather>{"city": "P"})",
        R"(<function=get_weather>{"city": "P"}</funct)", "<n>12"}) {
    const int32_t st = d.walk(d.start(), s);
    EXPECT_GE(st, 0) << s;
    EXPECT_FALSE(d.accepting(st)) << s;
  }
  // The end string is required as written.
  EXPECT_FALSE(d.matches("<n>12</m>"));
  EXPECT_EQ(d.walk(d.start(), "<n>12</m>"), ByteDfa::kDead);
}

TEST(GuidedStructuralTag, LongestTriggerEndingAtAByteFires) {
  // "b>" is a suffix of "ab>": after "ab>" the longer one's structure
  // follows, after "cb>" the shorter one's.
  const json tag = {{"structures",
                     {{{"begin", "ab>"}, {"schema", {{"type", "integer"}}}, {"end", "<"}},
                      {{"begin", "b>"}, {"schema", {{"type", "boolean"}}}, {"end", "<"}}}},
                    {"triggers", {"b>", "ab>"}}};
  const ByteDfa d = dfa_of(tag);
  EXPECT_TRUE(d.matches("ab>12<"));
  EXPECT_FALSE(d.matches("ab>true<"));
  EXPECT_TRUE(d.matches("cb>true<"));
  EXPECT_TRUE(d.matches("b>false< ab>3<"));
  EXPECT_FALSE(d.matches("cb>3<"));
}

TEST(GuidedStructuralTag, EmptyEndMissingSchemaAndWhitespace) {
  // No end: free text resumes right after the JSON value. No schema: any
  // JSON value.
  const json tag = {{"structures",
                     {{{"begin", "@"}, {"schema", {{"type", "integer"}}}, {"end", ""}},
                      {{"begin", "#"}, {"end", ";"}}}},
                    {"triggers", {"@", "#"}}};
  const ByteDfa d = dfa_of(tag);
  EXPECT_TRUE(d.matches("@12 and more"));
  EXPECT_TRUE(d.matches("@12"));
  EXPECT_FALSE(d.matches("@x"));
  EXPECT_TRUE(d.matches(R"(#{"any": [1, "thing"]};)"));
  EXPECT_TRUE(d.matches("#null;"));
  EXPECT_FALSE(d.matches("#nul;"));
  // The whitespace pattern is the JSON guides' one.
  const ByteDfa tight = structural_tag_dfa(parse_structural_tag(function_tag()), "");
  EXPECT_TRUE(tight.matches(R"(<function=get_weather>{"city":"P"}</function>)"));
  EXPECT_FALSE(tight.matches(R"(<function=get_weather>{"city": "P"}</function>)"));
}

TEST(GuidedStructuralTag, ParseFromTextAndCanonicalJson) {
  const StructuralTag a = parse_structural_tag(std::string_view(function_tag().dump()));
  ASSERT_EQ(a.structures.size(), 3u);
  EXPECT_EQ(a.structures[0].begin, "<function=get_weather>");
  EXPECT_EQ(json::parse(a.structures[0].schema), weather_schema());
  ASSERT_EQ(a.triggers.size(), 2u);
  const StructuralTag b = parse_structural_tag(std::string_view(structural_tag_json(a)));
  EXPECT_EQ(structural_tag_json(a), structural_tag_json(b));
  // An exact repeat of a trigger is dropped.
  json rep = function_tag();
  rep["triggers"] = {"<n>", "<function=", "<n>"};
  EXPECT_EQ(parse_structural_tag(rep).triggers.size(), 2u);
}

void expect_error(const json& tag, const std::string& needle) {
  try {
    (void)structural_tag_dfa(parse_structural_tag(tag), kDefaultWhitespace);
    ADD_FAILURE() << "no error for " << tag.dump();
  } catch (const StructuralTagError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << e.what() << "\n  expected: " << needle;
  }
}

TEST(GuidedStructuralTag, InvalidTagsNameTheField) {
  const json good = function_tag();
  auto with = [&](const char* key, json v) {
    json t = good;
    t[key] = std::move(v);
    return t;
  };
  auto without = [&](const char* key) {
    json t = good;
    t.erase(key);
    return t;
  };
  expect_error(json::array(), "must be an object");
  expect_error(without("structures"), "structures is required");
  expect_error(with("structures", json::array()), "structures must be a non-empty list");
  expect_error(with("structures", "x"), "structures must be a non-empty list");
  expect_error(without("triggers"), "triggers is required");
  expect_error(with("triggers", json::array()), "triggers must be a non-empty list");
  expect_error(with("triggers", {"<function=", 3}), "triggers[1] must be a string");
  expect_error(with("triggers", {"<function=", ""}), "triggers[1] is empty");
  expect_error(with("triggers", {"<function=", "<n>", "<f"}),
               R"(trigger "<f" is a prefix of trigger "<function=")");
  expect_error(with("triggers", {"<function=", "<n>", "[["}), R"(trigger "[[" begins none)");
  expect_error(with("triggers", {"<function="}), R"(structures[2].begin "<n>" starts with none)");
  expect_error(with("type", "json_schema"), "type must be \"structural_tag\"");
  expect_error(with("format", json::object()), "'format' form");
  expect_error(with("tags", json::array()), "no field 'tags'");
  json t = good;
  t["structures"][1].erase("begin");
  expect_error(t, "structures[1].begin is required");
  t = good;
  t["structures"][0]["end"] = 5;
  expect_error(t, "structures[0].end must be a string");
  t = good;
  t["structures"][0]["shema"] = json::object();
  expect_error(t, "structures[0] has no field 'shema'");
  t = good;
  t["structures"][2]["schema"] = "integer";
  expect_error(t, "structures[2].schema must be a JSON schema");
  t = good;
  t["structures"][2]["schema"] = {{"type", "intger"}};
  expect_error(t, "structures[2].schema: ");
  t = good;
  t["structures"][1] = "x";
  expect_error(t, "structures[1] must be an object");
  // Too many states altogether (the DFA's, then the NFA's limit): the tag
  // is named, not the structure that passed the limit.
  for (const auto& [max_length, limit] :
       {std::pair{100, "DFA states"}, std::pair{400, "automaton states"}}) {
    t = good;
    for (int k = 0; k < 40; ++k)
      t["structures"].push_back({{"begin", "<n>" + std::to_string(k)},
                                 {"schema", {{"type", "string"}, {"maxLength", max_length}}},
                                 {"end", "</n>"}});
    expect_error(t, "the structural tag is too large (43 structures' schemas together)");
    expect_error(t, limit);
  }
  try {
    (void)parse_structural_tag(std::string_view("{\"structures\": ["));
    ADD_FAILURE();
  } catch (const StructuralTagError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

std::shared_ptr<const TokenVocab> qwen_vocab() {
  static const std::shared_ptr<const Tokenizer> tok =
      load_tokenizer(test::shared_model("tiny-random-qwen2-chat"));
  return TokenVocab::of(tok);
}

TEST(GuidedStructuralTag, GuideMasksOverQwenVocabulary) {
  const auto vocab = qwen_vocab();
  const GuideSpec spec{GuideKind::kStructuralTag, function_tag().dump()};
  const auto g = compile_guide(spec, vocab);
  EXPECT_EQ(compile_guide(spec, vocab), g);  // cached
  EXPECT_EQ(g->max_output_bytes(), -1);
  const int32_t s0 = g->start();
  EXPECT_TRUE(g->accepting(s0));
  EXPECT_TRUE(g->can_continue(s0));
  // Free text allows every token but those running into a trigger with a
  // wrong continuation.
  const TokenMask& m0 = g->mask(s0);
  int64_t with_bytes = 0;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& b = vocab->bytes(id);
    if (b.empty()) continue;
    ++with_bytes;
    const bool ok = g->walk(s0, b) >= 0;
    EXPECT_EQ(m0.test(id), ok) << id;
  }
  EXPECT_GT(m0.count, with_bytes * 99 / 100);
  // Inside a structure: only what the begin / schema / end allow; EOS not.
  const int32_t in = g->walk(s0, "Sure.<function=get_weather>{\"city\": ");
  ASSERT_GE(in, 0);
  EXPECT_FALSE(g->accepting(in));
  EXPECT_TRUE(g->can_continue(in));
  const TokenMask& mi = g->mask(in);
  EXPECT_GT(mi.count, 0);
  EXPECT_LT(mi.count, with_bytes / 20);  // a '"' opening the string, maybe with letters
  const int32_t after = g->walk(in, "\"Rome\"}</function>");
  ASSERT_GE(after, 0);
  EXPECT_TRUE(g->accepting(after));
  EXPECT_GT(g->mask(after).count, with_bytes * 99 / 100);
  EXPECT_TRUE(g->matches("x<n>5</n>y"));
  EXPECT_FALSE(g->matches("x<n>5"));
  EXPECT_THROW(guide_regex(spec), std::invalid_argument);
}

TEST(GuidedStructuralTag, ACommonTriggerRulesOutTokensThatRunPastIt) {
  // Trigger "a": free text may hold no "a" unless "a:" and an integer follow,
  // so "cat" is out and "ca" is in (the "a" ends it: ":" must come next).
  const auto vocab = qwen_vocab();
  const json tag = {
      {"structures", {{{"begin", "a:"}, {"schema", {{"type", "integer"}}}, {"end", ";"}}}},
      {"triggers", {"a"}}};
  const auto g = compile_guide({GuideKind::kStructuralTag, tag.dump()}, vocab);
  const TokenMask& m0 = g->mask(g->start());
  int64_t with_a_inside = 0, with_bytes = 0;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& b = vocab->bytes(id);
    if (b.empty()) continue;
    ++with_bytes;
    const size_t a = b.find('a');
    if (a != std::string::npos && a + 1 < b.size() && b[a + 1] != ':') {
      ++with_a_inside;
      EXPECT_FALSE(m0.test(id)) << b;
    }
    if (a == std::string::npos) {
      EXPECT_TRUE(m0.test(id)) << b;
    }
  }
  EXPECT_GT(with_a_inside, 1000);
  EXPECT_LE(m0.count, with_bytes - with_a_inside);
  const int32_t st = g->walk(g->start(), "ca");
  ASSERT_GE(st, 0);
  EXPECT_FALSE(g->accepting(st));
  EXPECT_TRUE(g->matches("ca:-3; the end"));
}

}  // namespace
}  // namespace pagoda::guided
