// Python's json.dumps(value, ensure_ascii=False) with its default
// separators (", " and ": "), as vLLM serializes a tool call's parsed
// arguments (serving_chat.py: json.dumps(tool_call.parameters,
// ensure_ascii=False); the hermes / llama3_json parsers likewise). Object
// keys in their order (ordered_json keeps the text's; a repeated key keeps
// its first position and last value, as a Python dict). Strings: escapes
// as Python writes them (\", \\, \b \f \n \r \t, other controls \u00XX),
// non-ASCII verbatim. Numbers: integers as parsed; floats as nlohmann
// writes them (shortest round trip; Python's repr may differ in notation,
// e.g. 1e15, and integers beyond 64 bits, parsed as floats here).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace pagoda {

std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace pagoda
