// Structural tags through the engine (the offline LLM, the server's request
// pipeline) on tiny-random-qwen2-chat (random weights: unconstrained, it
// writes anything) at temperature 1, 80 seeds, through
// structured_outputs.structural_tag and the top-level structural_tag field.
// The triggers are single letters, pushed by logit biases so the random
// model reaches them often. Every
// output is split at its structures by hand (the first trigger in the free
// text, a structure's begin, then the shortest JSON value nlohmann parses
// and the schema check accepts before an end, and so on): each structure's
// JSON is valid for its schema, and an unterminated structure appears only
// when the output finished "length" (a cut-short structure is checked
// lexically: its JSON must be a prefix nlohmann fails on only at the end);
// the guide itself walks every output to a live state. A logit bias on EOS
// makes some outputs end "stop", which the guide allows only in free text.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/structural_tag.h"
#include "server/llm.h"

namespace pagoda {
namespace {

using nlohmann::json;

struct Structure {
  std::string begin, end;
  bool (*valid)(const json&);
};

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool valid_trip(const json& v) {  // {"city": string <= 8, "days": 1..7}, both required, no other
  if (!v.is_object() || v.size() != 2 || !v.contains("city") || !v.contains("days")) return false;
  const json& c = v["city"];
  const json& d = v["days"];
  return c.is_string() && code_points(c.get<std::string>()) <= 8 && d.is_number_integer() &&
         d.get<int64_t>() >= 1 && d.get<int64_t>() <= 7;
}

bool valid_flags(const json& v) {  // at most 3 booleans
  if (!v.is_array() || v.size() > 3) return false;
  for (const json& x : v)
    if (!x.is_boolean()) return false;
  return true;
}

bool valid_pick(const json& v) { return v == json("x") || v == json("y") || v == json(1); }

const std::vector<Structure>& structures() {
  static const std::vector<Structure> s = {
      {"a=", ";", valid_trip}, {"a:", ";", valid_flags}, {"q<", ">", valid_pick}};
  return s;
}
const std::vector<std::string> kTriggers = {"a", "q"};

json tag_json() {
  return {{"structures",
           {{{"begin", "a="},
             {"schema",
              {{"type", "object"},
               {"properties",
                {{"city", {{"type", "string"}, {"maxLength", 8}}},
                 {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
               {"required", {"city", "days"}},
               {"additionalProperties", false}}},
             {"end", ";"}},
            {{"begin", "a:"},
             {"schema", {{"type", "array"}, {"items", {{"type", "boolean"}}}, {"maxItems", 3}}},
             {"end", ";"}},
            {{"begin", "q<"}, {"schema", {{"enum", {"x", "y", 1}}}}, {"end", ">"}}}},
          {"triggers", kTriggers}};
}

struct Split {
  int complete = 0;           // structures with valid JSON and their end
  bool unterminated = false;  // the text ends inside a structure
  std::string error;          // not empty: the text breaks the rules
};

// True when `text` is a JSON value cut short: nlohmann's parser fails only
// at the end of the input (its error position is past the last byte).
struct PrefixProbe : json::json_sax_t {
  size_t error_at = 0;
  bool failed = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t at, const std::string&,
                   const nlohmann::detail::exception&) override {
    failed = true;
    error_at = at;
    return false;
  }
};
bool json_prefix(const std::string& text) {
  PrefixProbe p;
  json::sax_parse(text, &p);
  return p.failed && p.error_at > text.size();
}

// Splits text[pos:] into free text and structures; backtracks over where a
// structure's JSON ends (an end string may also occur inside the JSON).
// False (out.error set) when the text breaks the rules.
bool split_from(const std::string& text, size_t pos, Split& out) {
  // The first trigger in the free text (single letters: no overlaps).
  const size_t t = text.find_first_of("aq", pos);
  if (t == std::string::npos) return true;
  const std::string_view rest = std::string_view(text).substr(t);
  for (const Structure& s : structures()) {
    if (rest.substr(0, s.begin.size()) != s.begin) {
      if (s.begin.starts_with(rest)) {  // the text ends inside the begin
        out.unterminated = true;
        return true;
      }
      continue;
    }
    const size_t json_at = t + s.begin.size();
    for (size_t e = text.find(s.end, json_at); e != std::string::npos;
         e = text.find(s.end, e + 1)) {
      json v = json::parse(text.substr(json_at, e - json_at), nullptr, false);
      if (v.is_discarded() || !s.valid(v)) continue;
      Split next = out;
      ++next.complete;
      if (split_from(text, e + s.end.size(), next)) {
        out = next;
        return true;
      }
    }
    // No valid JSON and end: the text must end inside this structure, in
    // its JSON (a value cut short, or a whole valid one before its end).
    const std::string tail = text.substr(json_at);
    const json v = json::parse(tail, nullptr, false);
    if ((!v.is_discarded() && s.valid(v)) || (v.is_discarded() && json_prefix(tail))) {
      out.unterminated = true;
      return true;
    }
    out.error = "the structure at byte " + std::to_string(t) + " has no valid JSON and end";
    return false;
  }
  out.error = "a trigger at byte " + std::to_string(t) + " is not followed by a structure's begin";
  return false;
}

Split split(const std::string& text) {
  Split s;
  if (!split_from(text, 0, s) && s.error.empty()) s.error = "no valid split";
  return s;
}

TEST(GuidedStructuralTagEngine, EightySeedsSplitIntoValidStructures) {
  EngineArgs args;
  args.device = "cpu";
  offline::LLM llm(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat", args);
  const std::string tag = tag_json().dump();
  // The random model repeats a few favourite tokens; logit biases on the
  // one-byte tokens "a" and "q" (0 to 40: its logits are far apart) make it
  // reach the triggers, and on EOS (<|im_end|>) make some outputs end.
  const auto vocab = guided::TokenVocab::of(llm.serving_model().tokenizer);
  std::string a_id, q_id;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    if (vocab->bytes(id) == "a") a_id = std::to_string(id);
    if (vocab->bytes(id) == "q") q_id = std::to_string(id);
  }
  ASSERT_FALSE(a_id.empty() || q_id.empty());
  std::vector<offline::Prompt> prompts;
  constexpr int kSeeds = 80;
  for (int i = 0; i < kSeeds; ++i) {
    json req = i % 2 ? json{{"structural_tag", tag}}
                     : json{{"structured_outputs", {{"structural_tag", tag}}}};
    req["prompt"] = "Plan " + std::to_string(i) + ":";
    req["temperature"] = 1.0;
    req["seed"] = i;
    req["max_tokens"] = 48;
    json bias = json::object();
    constexpr double kTriggerBias[] = {0, 20, 30, 40}, kEosBias[] = {20, 25, 30, 35};
    if (i % 4) bias[a_id] = bias[q_id] = kTriggerBias[i % 4];
    if (i % 3 == 0) bias["151645"] = kEosBias[(i / 3) % 4];
    if (!bias.empty()) req["logit_bias"] = bias;
    prompts.push_back(offline::Prompt::from_json(req));
  }
  auto outs = llm.generate(prompts, std::nullopt, /*use_tqdm=*/false);
  ASSERT_EQ(outs.size(), prompts.size());
  // The guide agrees: every output is a live prefix, a complete one when
  // it ended on EOS.
  const auto guide =
      guided::compile_guide({guided::GuideKind::kStructuralTag,
                             guided::structural_tag_json(guided::parse_structural_tag(tag_json()))},
                            vocab);
  int complete = 0, stopped = 0, with_structure = 0, unterminated = 0, stopped_after = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i].outputs.at(0);
    std::string bytes;  // the tokens' bytes (the text may show U+FFFD for a cut UTF-8 sequence)
    for (int32_t id : o.token_ids) bytes += guide->vocab().bytes(id);
    const int32_t st = guide->walk(guide->start(), bytes);
    EXPECT_GE(st, 0) << "case " << i << ": '" << o.text << "'";
    if (o.finish_reason == "stop") {
      EXPECT_TRUE(guide->accepting(st)) << "case " << i << ": '" << o.text << "'";
    }
    const Split s = split(o.text);
    EXPECT_TRUE(s.error.empty()) << "case " << i << ": " << s.error << "\n'" << o.text << "'";
    if (s.unterminated) {
      ++unterminated;
      EXPECT_EQ(o.finish_reason, "length") << "case " << i << ": '" << o.text << "'";
    }
    complete += s.complete;
    with_structure += s.complete > 0;
    stopped += o.finish_reason == "stop";
    stopped_after += o.finish_reason == "stop" && s.complete > 0;
  }
  std::printf(
      "%d outputs: %d with a structure, %d structures, %d unterminated, %d stopped (%d after a "
      "structure)\n",
      kSeeds, with_structure, complete, unterminated, stopped, stopped_after);
  // Not vacuous: structures were written, cut short, and some outputs ended
  // on EOS after one.
  EXPECT_GE(with_structure, kSeeds / 4);
  EXPECT_GE(unterminated, 3);
  EXPECT_GE(stopped, 3);
  EXPECT_GE(stopped_after, 1);
}

TEST(GuidedStructuralTagEngine, SplitterAgreesOnHandWrittenTexts) {
  EXPECT_EQ(split("hello").complete, 0);
  EXPECT_EQ(split(R"(xa={"city": "b;c", "days": 2};yq<"x">z)").complete, 2);
  EXPECT_TRUE(split("xa:[tr").unterminated);
  EXPECT_TRUE(split("xa").unterminated);
  EXPECT_FALSE(split("xab").error.empty());
  EXPECT_FALSE(split(R"(q<"z">)").error.empty());    // not in the enum
  EXPECT_FALSE(split(R"(q<"x">ab)").error.empty());  // "a" then "b"
  EXPECT_FALSE(split("a:[1];").error.empty());
  EXPECT_TRUE(split(R"(a={"city": "b;)").unterminated);
  EXPECT_TRUE(split("a:[true, fa").unterminated);
  EXPECT_TRUE(split("q<1").unterminated);
  EXPECT_FALSE(split("a:[true, fx").error.empty());
}

}  // namespace
}  // namespace pagoda
