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
//                (server/tool_call_parser.h). With an empty tools list it
//                is content, as without tools (vLLM).
//     "required", a named function: no server flag needed (vLLM's rule);
//                the output is constrained with guided decoding to the JSON
//                schema of server/tool_choice_schema.h
//                (apply_tool_choice_guide) and read as calls
//                (server/forced_tool_calls.h). "required" with an empty
//                tools list is "none" without tools (vLLM, as OpenAI).
// Errors: openai_fields::RequestFieldError (400, param "tools" or
// "tool_choice").
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/sample/sampling_params.h"
#include "server/forced_tool_calls.h"
#include "server/serving_model.h"
#include "server/tool_call_parser.h"

namespace pagoda::request_model {
class RequestFields;
}

namespace pagoda {

struct ChatTools {
  // The template's `tools` variable; null when the request has none.
  nlohmann::ordered_json tools;
  // Set: the output is parsed for tool calls with this parser (tool_choice
  // "auto"); kNone: the output is content.
  ToolParserKind parser = ToolParserKind::kNone;
  // tool_choice a named function: its name; "" otherwise.
  std::string forced_function;
  // tool_choice "required".
  bool required = false;
};

// tools / tool_choice: the request's values (null pointers when absent or
// null); `ordered_tools`: the same tools with the key order as sent (null:
// `tools`' order, i.e. sorted).
ChatTools parse_chat_tools(const nlohmann::json* tools, const nlohmann::json* tool_choice,
                           const nlohmann::ordered_json* ordered_tools, const ServingModel& model);

// tool_choice "required" or a named function (else nothing): compiles the
// tools' schema (server/tool_choice_schema.h) into sp.guide / sp.guided_spec
// and sets `forced` for the output side. Objects without
// "additionalProperties" are closed (GuideSpec::
// disable_additional_properties), as vLLM's default xgrammar backend
// (strict mode) generates them. 400 (RequestFieldError) when the request
// also has a guided decoding field (`fields`: the request's; the message
// names it: vLLM would let the tools' schema replace it silently), or when
// the schema uses what the JSON-schema compiler lacks (param "tools", the
// message naming the keyword; engine/guided/json_schema_regex.h).
void apply_tool_choice_guide(const ChatTools& tools, const request_model::RequestFields& fields,
                             const ServingModel& model, SamplingParams& sp,
                             ForcedToolChoice& forced);

}  // namespace pagoda
