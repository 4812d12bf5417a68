// The JSON schema that guided decoding constrains a chat completion to for
// tool_choice "required" or a named function, as vLLM builds it
// (vllm/entrypoints/openai/protocol.py, ChatCompletionRequest.
// _get_guided_json_from_tool, v0.10; tool_parsers/utils.py
// get_json_schema_from_tools in later releases):
//   named      the tool's "parameters" object as sent. A tool without
//              parameters (null): {"type": "object", "properties": {}}, the
//              schema vLLM's "required" uses for it (vLLM's named branch
//              returns None there and leaves the output unconstrained,
//              whose text then is not JSON arguments).
//   required   {"type": "array", "minItems": 1, "items": {"type": "object",
//              "anyOf": [one branch per tool, in the tools' order:
//              {"properties": {"name": {"type": "string", "enum": [NAME]},
//              "parameters": PARAMS}, "required": ["name", "parameters"]}]}},
//              PARAMS the tool's parameters, or {"type": "object",
//              "properties": {}} when null or empty. Each tool's "$defs"
//              move to the top level (its "#/$defs/..." references then
//              resolve there), as vLLM moves them.
// tools: ChatTools::tools (each {"type": "function", "function": {"name",
// "parameters", ...}}), already checked by parse_chat_tools.
// Errors: openai_fields::RequestFieldError (400, param "tools") when two
// tools define one $defs name differently (vLLM's ValueError).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace pagoda {

// Named function `name` (must be one of tools).
nlohmann::ordered_json named_tool_schema(const nlohmann::ordered_json& tools,
                                         const std::string& name);
// tool_choice "required".
nlohmann::ordered_json required_tools_schema(const nlohmann::ordered_json& tools);

}  // namespace pagoda
