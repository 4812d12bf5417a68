// ToolCallParser (server/tool_call_parser.h): hermes and llama3_json, the
// whole text at once, split at every byte boundary, and one byte at a time;
// each split must give the same content and calls, and every call's first
// delta must carry its id and name before any arguments fragment.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

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
// delta order.
Parsed run(ToolParserKind kind, const std::vector<std::string>& pieces) {
  int ids = 0;
  ToolCallParser p(kind, [&] { return "call-" + std::to_string(ids++); });
  Parsed out;
  auto take = [&](ToolParseResult r) {
    out.content += r.content;
    for (ToolCallDelta& d : r.calls) {
      ++out.deltas;
      if (d.index == static_cast<int>(out.calls.size())) {
        EXPECT_FALSE(d.id.empty()) << "a call's first delta carries its id";
        EXPECT_FALSE(d.name.empty()) << "a call's first delta carries its name";
        out.calls.push_back({d.id, d.name, d.arguments});
      } else {
        EXPECT_EQ(d.index, static_cast<int>(out.calls.size()) - 1);
        EXPECT_TRUE(d.id.empty());
        EXPECT_TRUE(d.name.empty());
        if (!out.calls.empty()) out.calls.back().arguments += d.arguments;
      }
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
  // Cut by max_tokens after the name: the call as far as it went.
  expect_all_splits(ToolParserKind::kHermes,
                    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"x",
                    {"", {{"call-0", "f", "{\"a\": \"x"}}});
  // Before the name was known: content.
  expect_all_splits(ToolParserKind::kHermes, "<tool_call>\n{\"na", {"<tool_call>\n{\"na", {}});
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
