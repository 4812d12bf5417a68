#include "server/tool_choice_schema.h"

#include <fmt/format.h>

#include "server/openai_fields.h"

namespace pagoda {

using nlohmann::ordered_json;
using openai_fields::fail;

namespace {

ordered_json empty_object_schema() {
  return ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
}

}  // namespace

ordered_json named_tool_schema(const ordered_json& tools, const std::string& name) {
  for (const ordered_json& t : tools) {
    const ordered_json& fn = t["function"];
    if (fn["name"] != name) continue;
    const ordered_json& params = fn["parameters"];
    return params.is_null() ? empty_object_schema() : params;
  }
  fail(fmt::format("Tool '{}' has not been passed in `tools`.", name), "tool_choice");
}

ordered_json required_tools_schema(const ordered_json& tools) {
  ordered_json branches = ordered_json::array();
  ordered_json defs = ordered_json::object();
  for (const ordered_json& t : tools) {
    const ordered_json& fn = t["function"];
    ordered_json params = fn["parameters"];
    if (params.is_object()) {
      if (auto d = params.find("$defs"); d != params.end()) {
        if (!d->is_object())
          fail(fmt::format("tool '{}': parameters.$defs must be an object",
                           fn["name"].get<std::string>()),
               "tools");
        for (const auto& [def_name, def_schema] : d->items()) {
          auto have = defs.find(def_name);
          if (have != defs.end() && *have != def_schema)
            fail(fmt::format("Tool definition '{}' has multiple schemas, which is not supported.",
                             def_name),
                 "tools");
          defs[def_name] = def_schema;
        }
        params.erase("$defs");
      }
    }
    // vLLM: `parameters if parameters else {...}`: null and {} alike.
    if (params.is_null() || (params.is_object() && params.empty())) params = empty_object_schema();
    ordered_json branch = ordered_json::object();
    branch["properties"] = ordered_json::object();
    branch["properties"]["name"] = {{"type", "string"},
                                    {"enum", ordered_json::array({fn["name"]})}};
    branch["properties"]["parameters"] = std::move(params);
    branch["required"] = ordered_json::array({"name", "parameters"});
    branches.push_back(std::move(branch));
  }
  ordered_json schema = ordered_json::object();
  schema["type"] = "array";
  schema["minItems"] = 1;
  schema["items"] = {{"type", "object"}, {"anyOf", std::move(branches)}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema;
}

}  // namespace pagoda
