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

// messages[i].tool_calls: each call checked, its arguments text parsed.
ordered_json tool_calls_for_template(const ordered_json& calls, const std::string& where) {
  if (!calls.is_array())
    fail(fmt::format("{}.tool_calls must be a list, got {}", where, type_name(json(calls))),
         "messages");
  ordered_json out = calls;
  for (size_t j = 0; j < out.size(); ++j) {
    ordered_json& call = out[j];
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      fail(fmt::format("{} must be an object with a 'function' object", at), "messages");
    ordered_json& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      fail(fmt::format("{}.function.name is required and must be a string", at), "messages");
    auto args = fn.find("arguments");
    if (args == fn.end() || !args->is_string()) continue;  // vLLM parses strings only
    ordered_json parsed = ordered_json::parse(args->get<std::string>(), nullptr,
                                              /*allow_exceptions=*/false);
    if (parsed.is_discarded())
      fail(fmt::format("{}.function.arguments is not valid JSON", at), "messages");
    *args = std::move(parsed);
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
    ordered_json msg = m;
    auto content = m.find("content");
    // OpenAI allows null content (an assistant turn beside tool_calls);
    // vLLM takes it, and a missing one, as an empty part list ("" as a
    // string).
    ordered_json parts = content_parts(content == m.end() ? nullptr : &*content, where);
    if (format == ChatContentFormat::kOpenAI && *role != "tool")
      msg["content"] = std::move(parts);
    else
      msg["content"] = content_text(parts);
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null())
      msg["tool_calls"] = tool_calls_for_template(*calls, where);
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
