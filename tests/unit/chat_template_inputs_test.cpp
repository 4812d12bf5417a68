// What a chat hands its template besides the messages, as vLLM hands it to
// transformers' apply_chat_template: documents and chat_template_kwargs with
// their keys in the order sent (Python dicts), with or without tools; and
// transformers' checks of the tools and documents it is handed (each a
// dict), chat_template_kwargs' own included (vLLM lets them override).
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/openai_request.h"
#include "tests/support/chat_serving_model.h"

namespace pagoda {
namespace {

// Prints the first document and the kwarg `kw` as tojson (key order shows).
constexpr const char* kTemplate =
    "{{ documents[0] | tojson }}|{{ kw | tojson }}|{{ (tools or []) | length }}";

std::string rendered(const ParseResult& r) {
  if (const auto* e = std::get_if<OpenAIError>(&r)) return "error: " + e->message;
  return std::get<ParsedRequest>(r).prompts.at(0).text;
}

const OpenAIError* error_of(const ParseResult& r) { return std::get_if<OpenAIError>(&r); }

TEST(ChatTemplateInputs, DocumentsAndKwargsKeepTheirKeyOrderWithOrWithoutTools) {
  const ServingModel m = test::chat_serving_model(kTemplate, ChatContentFormat::kAuto);
  const std::string head =
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )"
      R"("documents": [{"z": "1", "a": "2"}], "chat_template_kwargs": {"kw": {"y": 1, "b": 2}})";
  const std::string want = R"({"z": "1", "a": "2"}|{"y": 1, "b": 2}|)";
  EXPECT_EQ(rendered(parse_chat_request(head + "}", m)), want + "0");
  const std::string tool =
      R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})";
  EXPECT_EQ(rendered(parse_chat_request(
                head + R"(, "tool_choice": "none", "tools": [)" + tool + "]}", m)),
            want + "1");
}

TEST(ChatTemplateInputs, ToolsAndDocumentsMustBeDictsAsTransformersChecks) {
  const ServingModel m = test::chat_serving_model(kTemplate, ChatContentFormat::kAuto);
  const std::string head = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  // chat_template_kwargs' tools replace the request's and are checked.
  ParseResult r = parse_chat_request(
      head + R"("documents": [{"a": 1}], "chat_template_kwargs": {"kw": 1, "tools": ["f"]}})", m);
  ASSERT_NE(error_of(r), nullptr) << rendered(r);
  EXPECT_EQ(error_of(r)->status, 400);
  EXPECT_EQ(error_of(r)->param, "chat_template_kwargs");
  EXPECT_EQ(error_of(r)->message,
            "Tools should either be a JSON schema, or a callable function with type hints and a "
            "docstring suitable for auto-conversion to a schema.");
  r = parse_chat_request(head + R"("documents": ["x"], "chat_template_kwargs": {"kw": 1}})", m);
  ASSERT_NE(error_of(r), nullptr) << rendered(r);
  EXPECT_EQ(error_of(r)->param, "documents");
  EXPECT_EQ(error_of(r)->message,
            "Documents should be a list of dicts with 'title' and 'text' keys!");
  // Dicts pass, and so does null (no tools).
  r = parse_chat_request(
      head + R"("documents": [{"a": 1}], "chat_template_kwargs": {"kw": 1, "tools": null}})", m);
  EXPECT_EQ(rendered(r), R"({"a": 1}|1|0)");
}

}  // namespace
}  // namespace pagoda
