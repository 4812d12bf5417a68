// ToolCallParser (server/tool_call_parser.h): hermes and llama3_json, the
// whole text at once, split at every byte boundary, and one byte at a time;
// each split must give the same content and calls, and every call's first
// delta must carry its id and name before any arguments fragment.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pagoda {
namespace {

struct Call {
  std::string id, name, arguments;
  bool operator==(const Call&) const = default;
};

struct Parsed {
  std::string content;
  std::vector<Call> calls;
  bool called = false;
  int deltas = 0;
};

// Feeds pieces, merging deltas as a client does (by index), and checks the
// delta order; a withdrawn call is dropped and its text put in the content,
// as the non-streamed response does (ChoiceAssembler).
Parsed run(ToolParserKind kind, const std::vector<std::string>& pieces) {
  int ids = 0;
  ToolCallParser p(kind, [&] { return "call-" + std::to_string(ids++); });
  Parsed out;
  std::vector<int> indexes;  // out.calls[i]'s index
  int next = 0;              // the next new call's index
  auto take = [&](ToolParseResult r) {
    size_t inserted = 0;
    const size_t base = out.content.size();
    out.content += r.content;
    for (ToolCallDelta& d : r.calls) {
      ++out.deltas;
      if (d.index == next) {
        EXPECT_FALSE(d.id.empty()) << "a call's first delta carries its id";
        EXPECT_FALSE(d.name.empty()) << "a call's first delta carries its name";
        out.calls.push_back({d.id, d.name, d.arguments});
        indexes.push_back(d.index);
        ++next;
      } else {
        EXPECT_EQ(d.index, next - 1);
        EXPECT_TRUE(d.id.empty());
        EXPECT_TRUE(d.name.empty());
        if (!indexes.empty() && indexes.back() == d.index)
          out.calls.back().arguments += d.arguments;
      }
    }
    for (const WithdrawnCall& w : r.withdrawn) {
      // A later call's deltas may come in the same result: by index.
      const auto at = std::find(indexes.begin(), indexes.end(), w.index);
      ASSERT_NE(at, indexes.end()) << "withdrawn call " << w.index << " was never started";
      out.calls.erase(out.calls.begin() + (at - indexes.begin()));
      indexes.erase(at);
      ASSERT_LE(w.offset, r.content.size());
      out.content.insert(base + inserted + w.offset, w.text);
      inserted += w.text.size();
    }
  };
  for (const std::string& s : pieces) take(p.feed(s));
  take(p.finish());
  out.called = p.called();
  return out;
}

// Every way of feeding `text` must give `want`.
void expect_all_splits(ToolParserKind kind, const std::string& text, const Parsed& want) {
  auto check = [&](const Parsed& got, const std::string& how) {
    EXPECT_EQ(got.content, want.content) << how;
    EXPECT_EQ(got.calls, want.calls) << how;
    EXPECT_EQ(got.called, !want.calls.empty()) << how;
  };
  check(run(kind, {text}), "whole");
  for (size_t i = 0; i <= text.size(); ++i)
    check(run(kind, {text.substr(0, i), text.substr(i)}), "split at " + std::to_string(i));
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  check(run(kind, bytes), "byte by byte");
}

TEST(ToolCallParser, Names) {
  EXPECT_EQ(tool_parser_from_name("hermes"), ToolParserKind::kHermes);
  EXPECT_EQ(tool_parser_from_name("llama3_json"), ToolParserKind::kLlama3Json);
  EXPECT_EQ(tool_parser_from_name("mistral"), std::nullopt);
  EXPECT_STREQ(tool_parser_name(ToolParserKind::kHermes), "hermes");
}

TEST(ToolCallParser, HermesPlainTextIsContent) {
  expect_all_splits(ToolParserKind::kHermes, "Hello <tool and </tool_call> a < b",
                    {"Hello <tool and </tool_call> a < b", {}});
}

TEST(ToolCallParser, HermesOneCall) {
  // Qwen2.5's form (its chat template's example).
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"c\"}}\n</tool_call>";
  expect_all_splits(ToolParserKind::kHermes, text,
                    {"", {{"call-0", "get_weather", R"({"city": "Paris", "unit": "c"})"}}});
}

TEST(ToolCallParser, HermesContentBeforeTwoCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}"
      "\n</tool_call>\n<tool_call>\n{\"name\":\"b\",\"arguments\":{}}\n</tool_call>\n";
  expect_all_splits(
      ToolParserKind::kHermes, text,
      {"Let me check.\n", {{"call-0", "a", R"({"x": [1, {"y": "}"}]})"}, {"call-1", "b", "{}"}}});
}

TEST(ToolCallParser, HermesTextAfterACallIsContent) {
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n\nDone.",
                    {"\n\nDone.", {{"call-0", "a", "{}"}}});
}

TEST(ToolCallParser, HermesWhitespaceAtTheEndIsDropped) {
  // Found by fuzz_tool_call_parser: fed whole or in pieces, the same content.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nDone.\n\n",
                    {"\nDone.", {{"call-0", "a", "{}"}}});
}

TEST(ToolCallParser, HermesEmptyNameIsNoCall) {
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
                    {"<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", {}});
}

TEST(ToolCallParser, HermesArgumentsFirstIsParsedWhole) {
  // Keys in another order: held until the block ends, then one delta with
  // the arguments as Python's json.dumps writes them.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>{\"arguments\":{\"q\":\"\\u00e9t\\u00e9\",\"n\":[1,2]},"
                    "\"name\":\"search\"}</tool_call>",
                    {"", {{"call-0", "search", "{\"q\": \"\xC3\xA9t\xC3\xA9\", \"n\": [1, 2]}"}}});
}

TEST(ToolCallParser, HermesInvalidBlockIsContent) {
  expect_all_splits(ToolParserKind::kHermes, "x<tool_call>{\"nam\": 1}</tool_call>y",
                    {"x<tool_call>{\"nam\": 1}</tool_call>y", {}});
  expect_all_splits(ToolParserKind::kHermes, "<tool_call>not json</tool_call>",
                    {"<tool_call>not json</tool_call>", {}});
}

TEST(ToolCallParser, HermesUnclosedBlock) {
  // Cut by max_tokens (or a stop string) after the name, its JSON not
  // closed: no call; the block is content, as vLLM's json.loads fails on it.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x",
                    {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x", {}});
  // Before the name was known: content.
  expect_all_splits(ToolParserKind::kHermes, "<tool_call>\n{\"na", {"<tool_call>\n{\"na", {}});
  // The JSON complete, the end tag not written (a stop string on it, or
  // max_tokens): vLLM's regex takes the unterminated last block, and its
  // JSON parses: a call.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",
                    {"", {{"call-0", "f", "{\"a\": 1}"}}});
  // Cut inside the end tag: the block's text runs to the end of the output,
  // "</tool" included, and is no JSON (vLLM's json.loads fails): content.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool",
                    {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool", {}});
  // After a complete call, a cut-off second one: the first stays a call.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n"
                    "<tool_call>{\"name\": \"g\", \"arguments\": {\"b",
                    {"<tool_call>{\"name\": \"g\", \"arguments\": {\"b", {{"call-0", "f", "{}"}}});
}

TEST(ToolCallParser, HermesStreamedCallThatEndsInvalidIsWithdrawn) {
  // The name went out as soon as it was known; the block then closed with
  // JSON that does not parse (one brace short): the call is withdrawn, its
  // text content; the next call gets a new index.
  const std::string bad = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>";
  const std::string good = "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
  expect_all_splits(ToolParserKind::kHermes, "x" + bad + "y", {"x" + bad + "y", {}});
  expect_all_splits(ToolParserKind::kHermes, bad + good, {bad, {{"call-1", "g", "{}"}}});
  ToolCallParser p(ToolParserKind::kHermes, [] { return std::string("id"); });
  ToolParseResult r = p.feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}");
  ASSERT_EQ(r.calls.size(), 2u);  // the name, then the arguments so far
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_TRUE(p.called() == false) << "not a call until its JSON is complete";
  r = p.feed("</tool_call>");
  ASSERT_EQ(r.withdrawn.size(), 1u);
  EXPECT_EQ(r.withdrawn[0].index, 0);
  EXPECT_EQ(r.withdrawn[0].text, bad);
  EXPECT_FALSE(p.called());
  r = p.feed(good);
  ASSERT_EQ(r.calls.size(), 2u);  // the name, then "{}"
  EXPECT_EQ(r.calls[0].index, 1);
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_TRUE(p.called());
}

TEST(ToolCallParser, Llama3JsonCutOffCallIsContent) {
  expect_all_splits(ToolParserKind::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"a",
                    {"{\"name\": \"f\", \"parameters\": {\"a", {}});
  expect_all_splits(ToolParserKind::kLlama3Json,
                    "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {",
                    {"{\"name\": \"g\", \"parameters\": {", {{"call-0", "f", "{}"}}});
}

TEST(ToolCallParser, HermesStreamsArgumentsInPieces) {
  // Fed token-sized pieces: the name delta, then one fragment per piece.
  Parsed got = run(ToolParserKind::kHermes,
                   {"<tool_call>", "\n{\"", "name", "\":", " \"", "f", "\",", " \"", "arguments",
                    "\":", " {\"", "a", "\":", " 1", "}}\n", "</tool_call>"});
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(got.deltas, 6);  // the name, then {"  a  ":  1  }
}

TEST(ToolCallParser, Llama3Json) {
  expect_all_splits(ToolParserKind::kLlama3Json,
                    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                    {"", {{"call-0", "get_weather", R"({"city": "Paris"})"}}});
  expect_all_splits(
      ToolParserKind::kLlama3Json,
      "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"s\": \"; {\"}}; {\"name\": \"b\", "
      "\"parameters\": {}}",
      {"", {{"call-0", "a", R"({"s": "; {"})"}, {"call-1", "b", "{}"}}});
}

TEST(ToolCallParser, Llama3JsonContent) {
  expect_all_splits(ToolParserKind::kLlama3Json, "The answer is {42}.",
                    {"The answer is {42}.", {}});
  expect_all_splits(ToolParserKind::kLlama3Json, "<|python", {"<|python", {}});
  expect_all_splits(ToolParserKind::kLlama3Json, "{\"x\": 1} and more",
                    {"{\"x\": 1} and more", {}});
}

}  // namespace
}  // namespace pagoda
