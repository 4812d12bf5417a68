#include "server/chat_prompt.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string_view>

#include "server/openai_fields.h"

namespace pagoda {

using nlohmann::json;
using nlohmann::ordered_json;
using openai_fields::fail;
using openai_fields::type_name;

namespace {

// An assistant message's tool_calls as vLLM's _postprocess_messages
// (vllm/renderers/chat_utils/parse_chat_message.py) hands them to the
// template: each call an object of type "function" (the default) with a
// "function" object, else 400 (vLLM's words); its arguments a JSON object:
// an object as sent, a string parsed; missing, null, empty, text that is not
// JSON or JSON that is not an object: {} (the latter two with a warning, as
// vLLM: a bad turn in the history must not fail every later request).
ordered_json tool_calls_for_template(const ordered_json& calls, const std::string& where) {
  if (!calls.is_array())
    fail(fmt::format("{}.tool_calls must be a list, got {}", where, type_name(json(calls))),
         "messages");
  ordered_json out = calls;
  for (size_t j = 0; j < out.size(); ++j) {
    ordered_json& call = out[j];
    if (!call.is_object()) fail("assistant tool_calls entries must be objects.", "tool_calls");
    auto type = call.find("type");
    auto fn_it = call.find("function");
    if ((type != call.end() && *type != "function") || fn_it == call.end() || !fn_it->is_object())
      fail("chat completions only support assistant tool_calls of type 'function'.", "tool_calls");
    ordered_json& fn = *fn_it;
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    if (!fn.contains("name") || !fn["name"].is_string())
      fail(fmt::format("{}.function.name is required and must be a string", at), "messages");
    ordered_json& args = fn["arguments"];  // (inserted as null when missing)
    const bool empty =
        args.is_null() || (args.is_string() && args.get_ref<const std::string&>().empty()) ||
        (args.is_boolean() && !args.get<bool>()) || (args.is_number() && args == 0) ||
        (args.is_array() && args.empty()) || (args.is_object() && args.empty());
    if (empty || args.is_object()) {
      if (empty) args = ordered_json::object();
      continue;
    }
    ordered_json parsed = args;
    if (args.is_string()) {
      parsed = ordered_json::parse(args.get_ref<const std::string&>(), nullptr,
                                   /*allow_exceptions=*/false);
      if (parsed.is_discarded())
        spdlog::warn(
            "Tool call '{}' has arguments that are not valid JSON ({} chars); coercing "
            "to an empty object so the conversation can continue",
            fn["name"].get_ref<const std::string&>(), args.get_ref<const std::string&>().size());
    }
    if (!parsed.is_discarded() && !parsed.is_object())
      spdlog::warn(
          "Tool call '{}' arguments decoded to {}, not a JSON object; coercing to an "
          "empty object",
          fn["name"].get_ref<const std::string&>(), type_name(json(parsed)));
    args = parsed.is_object() ? std::move(parsed) : ordered_json::object();
  }
  return out;
}

}  // namespace

namespace {

// messages[i].content as a list of text parts (vLLM's wrap_dicts: each part
// rebuilt as {"type": "text", "text"}); null or missing: no part. The parts
// vLLM's _parse_chat_message_content_part reads as text: a plain string;
// "text", "input_text" and "output_text" ({"text"}), "refusal"
// ({"refusal"}) and "thinking" ({"thinking"}). A "text" or "refusal" part
// whose value is missing or null is skipped with a warning, as vLLM does.
ordered_json content_parts(const ordered_json* content, const std::string& where) {
  ordered_json parts = ordered_json::array();
  if (!content || content->is_null()) return parts;
  if (content->is_string()) {
    parts.push_back({{"type", "text"}, {"text", *content}});
    return parts;
  }
  if (!content->is_array())
    fail(fmt::format("{}.content must be a string or a list of content parts, got {}", where,
                     type_name(json(*content))),
         "messages");
  for (size_t j = 0; j < content->size(); ++j) {
    const ordered_json& part = (*content)[j];
    if (part.is_string()) {
      parts.push_back({{"type", "text"}, {"text", part}});
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail(fmt::format("{}.content[{}] must be a string or an object with a string 'type'", where,
                       j),
           "messages");
    const std::string& type = part["type"].get_ref<const std::string&>();
    const char* key = type == "text" || type == "input_text" || type == "output_text" ? "text"
                      : type == "refusal"                                             ? "refusal"
                      : type == "thinking"                                            ? "thinking"
                                                                                      : nullptr;
    if (!key)
      fail(fmt::format("{}.content[{}] has type '{}': only text parts (text, input_text, "
                       "output_text, refusal, thinking) are supported",
                       where, j, type),
           "messages");
    auto t = part.find(key);
    if ((t == part.end() || t->is_null()) && (type == "text" || type == "refusal")) {
      spdlog::warn("Skipping content part {} (type: '{}') with empty / unparsable content",
                   part.dump(), type);
      continue;
    }
    if (t == part.end() || !t->is_string())
      fail(fmt::format("{}.content[{}].{} is required and must be a string", where, j, key),
           "messages");
    parts.push_back({{"type", "text"}, {"text", *t}});
  }
  return parts;
}

}  // namespace

std::string content_text(const ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (size_t j = 0; j < content.size(); ++j) {
    if (j) text += "\n";
    text += content[j].value("text", std::string());
  }
  return text;
}

std::string final_message_text(const ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array())
    for (auto it = content.rbegin(); it != content.rend(); ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string())
        return (*it)["text"].get<std::string>();
  fail(
      "continue_final_message is set but we could not find any text to continue in the final "
      "message!",
      "messages");
}

ordered_json chat_messages(const ordered_json* msgs, int64_t max_messages,
                           ChatContentFormat format) {
  if (!msgs || msgs->is_null()) fail("'messages' is required", "messages");
  if (!msgs->is_array())
    fail(fmt::format("'messages' must be a list, got {}", type_name(json(*msgs))), "messages");
  if (msgs->empty()) fail("'messages' must not be empty", "messages");
  if (max_messages > 0 && msgs->size() > static_cast<size_t>(max_messages))
    fail(fmt::format("'messages' has {} messages; the server allows at most {} per chat "
                     "(--max-chat-messages)",
                     msgs->size(), max_messages),
         "messages");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ordered_json& m = (*msgs)[i];
    std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object())
      fail(fmt::format("{} must be an object, got {}", where, type_name(json(m))), "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      fail(fmt::format("{}.role is required and must be a string", where), "messages");
    // The message rebuilt as vLLM's _parse_chat_message_content does
    // (vllm/renderers/chat_utils/parse_chat_message_content.py): role and
    // content, then only the keys it keeps, in its order; any other key the
    // client sent does not reach the template.
    const std::string& r = role->get_ref<const std::string&>();
    ordered_json msg = ordered_json::object();
    msg["role"] = *role;
    auto content = m.find("content");
    // OpenAI allows null content (an assistant turn beside tool_calls);
    // vLLM takes it, and a missing one, as an empty part list ("" as a
    // string).
    ordered_json parts = content_parts(content == m.end() ? nullptr : &*content, where);
    if (format == ChatContentFormat::kOpenAI && r != "tool")
      msg["content"] = std::move(parts);
    else
      msg["content"] = content_text(parts);
    if (r == "assistant") {
      // An empty list is dropped (the template's plain assistant path).
      if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
        ordered_json checked = tool_calls_for_template(*calls, where);
        if (!checked.empty()) msg["tool_calls"] = std::move(checked);
      }
      // "reasoning" (vLLM's name; a client's "reasoning_content" is not
      // read), under both names for the templates that use either.
      if (auto reasoning = m.find("reasoning"); reasoning != m.end() && !reasoning->is_null()) {
        msg["reasoning"] = *reasoning;
        msg["reasoning_content"] = *reasoning;
      }
    } else if (r == "tool") {
      if (auto id = m.find("tool_call_id"); id != m.end()) msg["tool_call_id"] = *id;
    }
    for (const char* key : {"name", "task"})
      if (auto v = m.find(key); v != m.end() && v->is_string()) msg[key] = *v;
    if (r == "developer") msg["tools"] = m.contains("tools") ? m["tools"] : ordered_json(nullptr);
    out.push_back(std::move(msg));
  }
  return out;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view lstrip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view strip(std::string_view s) {
  s = lstrip(s);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string cut_after_final_message(const std::string& rendered, const std::string& final_content) {
  const std::string_view stripped = strip(final_content);
  const size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos)
    fail(
        "continue_final_message is set but the final message does not appear in the chat after "
        "applying the "
        "chat template! This can happen if the chat template deletes portions of the final "
        "message. Please "
        "verify the chat template and final message in your chat to ensure they are compatible.",
        "messages");
  const size_t whole = lstrip(final_content).size();
  if (std::string_view(rendered).substr(loc, whole) == final_content)
    return rendered.substr(0, loc + whole);
  return rendered.substr(0, loc + stripped.size());
}

}  // namespace pagoda
