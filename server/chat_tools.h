// A chat request's tools and tool_choice, checked as vLLM's
// ChatCompletionRequest (vllm/entrypoints/openai/protocol.py) and
// serving_chat.py check them, and turned into what the chat template and the
// output path need.
//
//   tools        a list of {"type": "function", "function": {"name": str,
//                "description"?: str, "parameters"?: object, ...}}; passed to
//                the template as vLLM's tool.model_dump() gives them: "type",
//                then "function" with "name", "description" (null when
//                absent), "parameters" (null when absent), then any other
//                keys as sent, each object's keys in the order sent (the
//                template's `tools | tojson` prints them; transformers keeps
//                a dict's order).
//   tool_choice  "none" | "auto" | "required" | {"type": "function",
//                "function": {"name": str}}; absent: "auto" with tools,
//                "none" without (vLLM's default).
//     "none"     tools still rendered (vLLM's default,
//                exclude_tools_when_tool_choice_none off); the output is
//                content.
//     "auto"     needs --enable-auto-tool-choice and --tool-call-parser
//                (else 400 in vLLM's words); the output is parsed for calls
//                (server/tool_call_parser.h).
//     "required", a named function: the output must be constrained to the
//                tools' parameter schemas (vLLM: guided decoding with a JSON
//                schema); 400 "not supported yet" until guided decoding is
//                wired in (see GuidedToolChoice below).
// Errors: openai_fields::RequestFieldError (400, param "tools" or
// "tool_choice").
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/serving_model.h"
#include "server/tool_call_parser.h"

namespace pagoda {

struct ChatTools {
  // The template's `tools` variable; null when the request has none.
  nlohmann::ordered_json tools;
  // Set: the output is parsed for tool calls with this parser (tool_choice
  // "auto"); kNone: the output is content.
  ToolParserKind parser = ToolParserKind::kNone;
  // tool_choice "required" or a named function: the name ("" for
  // "required"). What guided decoding would constrain; today the request
  // is refused before this is used.
  std::string forced_function;
  bool required = false;
};

// tools / tool_choice: the request's values (null pointers when absent or
// null); `ordered_tools`: the same tools with the key order as sent (null:
// `tools`' order, i.e. sorted).
ChatTools parse_chat_tools(const nlohmann::json* tools, const nlohmann::json* tool_choice,
                           const nlohmann::ordered_json* ordered_tools, const ServingModel& model);

}  // namespace pagoda
