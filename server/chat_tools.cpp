#include "server/chat_tools.h"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "engine/guided/guide.h"
#include "server/openai_fields.h"
#include "server/request_model.h"
#include "server/tool_choice_schema.h"

namespace pagoda {

using nlohmann::json;
using nlohmann::ordered_json;
using openai_fields::fail;
using openai_fields::type_name;

namespace {

// One tool as vLLM's ChatCompletionToolsParam.model_dump() writes it.
ordered_json dump_tool(const ordered_json& t, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object()) fail(fmt::format("{} must be an object", where), "tools");
  auto type = t.find("type");
  if (type != t.end() && !(type->is_string() && type->get<std::string>() == "function"))
    fail(fmt::format("{}.type must be \"function\"", where), "tools");
  auto fn = t.find("function");
  if (fn == t.end() || !fn->is_object())
    fail(fmt::format("{}.function is required and must be an object", where), "tools");
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string())
    fail(fmt::format("{}.function.name is required and must be a string", where), "tools");
  ordered_json f = ordered_json::object();
  f["name"] = *name;
  f["description"] = nullptr;
  f["parameters"] = nullptr;
  for (const auto& [k, v] : fn->items()) {
    if (k == "description" && !(v.is_string() || v.is_null()))
      fail(fmt::format("{}.function.description must be a string", where), "tools");
    if (k == "parameters" && !(v.is_object() || v.is_null()))
      fail(fmt::format("{}.function.parameters must be an object", where), "tools");
    f[k] = v;
  }
  ordered_json out = ordered_json::object();
  out["type"] = "function";
  out["function"] = std::move(f);
  for (const auto& [k, v] : t.items())
    if (k != "type" && k != "function") out[k] = v;
  return out;
}

}  // namespace

ChatTools parse_chat_tools(const json* tools, const json* tool_choice,
                           const ordered_json* ordered_tools, const ServingModel& model) {
  ChatTools out;
  if (tools) {
    const ordered_json list = ordered_tools ? *ordered_tools : ordered_json(*tools);
    if (!list.is_array())
      fail(fmt::format("'tools' must be a list, got {}", type_name(*tools)), "tools");
    out.tools = ordered_json::array();
    for (size_t i = 0; i < list.size(); ++i) out.tools.push_back(dump_tool(list[i], i));
  }
  const bool have_tools = tools && !out.tools.empty();
  // vLLM: "required" with an empty tools list is "none" (as OpenAI), the
  // tools dropped.
  if (tool_choice && tool_choice->is_string() && *tool_choice == "required" && tools &&
      out.tools.is_array() && out.tools.empty()) {
    out.tools = nullptr;
    return out;
  }
  // vLLM: tool_choice defaults to "auto" when tools are given, else "none".
  std::string choice = have_tools ? "auto" : "none";
  if (tool_choice) {
    if (tool_choice->is_string()) {
      choice = tool_choice->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        fail(fmt::format("Invalid value for `tool_choice`: '{}'. Only named tools, \"none\", "
                         "\"auto\" or \"required\" are supported.",
                         choice),
             "tool_choice");
    } else if (tool_choice->is_object()) {
      auto fn = tool_choice->find("function");
      auto type = tool_choice->find("type");
      if (type == tool_choice->end() || *type != "function" || fn == tool_choice->end() ||
          !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        fail(
            "`tool_choice` as an object must be {\"type\": \"function\", \"function\": "
            "{\"name\": \"<name>\"}}",
            "tool_choice");
      choice = "function";
      out.forced_function = (*fn)["name"].get<std::string>();
    } else {
      fail(fmt::format("'tool_choice' must be a string or an object, got {}",
                       type_name(*tool_choice)),
           "tool_choice");
    }
  }
  // vLLM checks that `tools` is present, not that it is non-empty: an empty
  // list with a named tool_choice is the name's mismatch below, and with
  // "auto" it is accepted (no calls are parsed, as vLLM parses them only
  // when the request has tools).
  if (choice != "none" && !tools)
    fail("When using `tool_choice`, `tools` must be set.", "tool_choice");
  if (choice == "function") {
    bool found = false;
    for (const ordered_json& t : out.tools)
      if (t["function"]["name"] == out.forced_function) found = true;
    if (!found)
      fail(fmt::format("The tool specified in `tool_choice` ('{}') does not match any of the "
                       "specified `tools`",
                       out.forced_function),
           "tool_choice");
  }
  // vLLM constrains these with guided decoding to a JSON schema of the
  // tools (server/tool_choice_schema.h; the request's guide is set by
  // apply_tool_choice_guide) and reads the calls from that JSON
  // (server/forced_tool_calls.h).
  out.required = choice == "required";
  if (choice == "auto") {
    if (!model.enable_auto_tool_choice || model.tool_call_parser == ToolParserKind::kNone)
      fail(
          "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be "
          "set",
          "tool_choice");
    if (have_tools) out.parser = model.tool_call_parser;
  }
  if (!tools) out.tools = nullptr;
  return out;
}

void apply_tool_choice_guide(const ChatTools& tools, const request_model::RequestFields& fields,
                             const ServingModel& model, SamplingParams& sp,
                             ForcedToolChoice& forced) {
  if (!tools.required && tools.forced_function.empty()) return;
  const std::string what =
      tools.required ? std::string("tool_choice \"required\"")
                     : fmt::format("tool_choice naming a function ('{}')", tools.forced_function);
  if (sp.guide) {
    std::string other = "guided decoding";
    for (const char* k : {"guided_json", "guided_regex", "guided_choice", "guided_grammar",
                          "structural_tag", "structured_outputs", "response_format"})
      if (fields.declares(k) && fields.value(k)) {
        other = k;
        break;
      }
    fail(fmt::format("{} cannot be combined with '{}': both constrain the output (vLLM lets the "
                     "tools' schema replace it)",
                     what, other),
         other);
  }
  const ordered_json schema = tools.required
                                  ? required_tools_schema(tools.tools)
                                  : named_tool_schema(tools.tools, tools.forced_function);
  guided::GuideSpec spec{guided::GuideKind::kJson, schema.dump()};
  // vLLM's default backend (xgrammar, strict mode) generates no property a
  // schema does not list: an object schema without "additionalProperties"
  // (a tool without parameters among them) is closed.
  spec.disable_additional_properties = true;
  if (!model.tokenizer) fail(fmt::format("{} needs the model's tokenizer", what), "tool_choice");
  try {
    sp.guide = guided::compile_guide(spec, guided::TokenVocab::of(model.tokenizer));
  } catch (const std::invalid_argument& e) {
    fail(fmt::format("{}: the tools' parameters cannot be used for guided decoding: {}", what,
                     e.what()),
         "tools");
  }
  sp.guided_spec = std::make_shared<const guided::GuideSpec>(std::move(spec));
  forced.kind = tools.required ? ForcedToolChoice::Kind::kRequired : ForcedToolChoice::Kind::kNamed;
  forced.name = tools.forced_function;
}

}  // namespace pagoda
