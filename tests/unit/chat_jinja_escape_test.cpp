// String-literal escapes of the Jinja subset (Python's unicode-escape, as
// Jinja2 decodes literals): a code point that is not a Unicode scalar value
// is a template error, never invalid UTF-8 in the prompt. Found by
// tests/fuzz/fuzz_chat_template (its corpus keeps the inputs): "\ud800"
// rendered the bytes ED A0 80, which the byte-level BPE tokenizer refuses
// (std::invalid_argument), so a chat request sending such a chat_template to
// a Qwen2 model was answered 500 instead of 400.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat/chat_template.h"

namespace pagoda {
namespace {

std::string render(const std::string& src) {
  return ChatTemplate(src).render(nlohmann::json::array(), false, "<s>", "</s>");
}

std::string error_of(const std::string& src) {
  try {
    render(src);
  } catch (const ChatTemplateError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ChatJinjaEscapes, ScalarValuesBecomeUtf8) {
  EXPECT_EQ(render(R"({{ "\xe9\u00e9\U0001F600\101" }})"),
            "\xc3\xa9\xc3\xa9\xf0\x9f\x98\x80"
            "A");
  EXPECT_EQ(render(R"({{ "\U0010FFFF\uD7FF\uE000" }})"),
            "\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80");
}

TEST(ChatJinjaEscapes, SurrogatesAreTemplateErrors) {
  EXPECT_EQ(error_of(R"({{ "\ud800" }})"),
            "surrogate code point in \\u escape cannot be encoded as UTF-8");
  EXPECT_EQ(error_of(R"({{ "\uDFFF" }})"),
            "surrogate code point in \\u escape cannot be encoded as UTF-8");
  EXPECT_EQ(error_of(R"({{ "\U0000D800" }})"),
            "surrogate code point in \\U escape cannot be encoded as UTF-8");
}

TEST(ChatJinjaEscapes, CodePointsBeyondU10FFFFAreTemplateErrors) {
  EXPECT_EQ(error_of(R"({{ "\U00110000" }})"), "illegal Unicode character in \\U escape");
  EXPECT_EQ(error_of(R"({{ "\UFFFFFFFF" }})"), "illegal Unicode character in \\U escape");
}

}  // namespace
}  // namespace pagoda
