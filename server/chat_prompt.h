// The chat side of a request's prompt: messages normalized for the
// template, and the rendered text cut after the final message when the
// request continues it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/chat_content_format.h"

namespace pagoda {

// The request's "messages" (null when absent or null) with each content
// put in the template's content format, other keys kept in the order sent,
// as vLLM's parse_chat_messages does. kString: null or missing → "" (vLLM
// renders both as ""), a list of {"type": "text", "text"} parts → the texts
// joined with "\n". kOpenAI: every content a list of {"type": "text",
// "text"} parts (a string → one part, null or missing → no part), except a
// "tool" message's, which stays a string (the parts' texts joined with
// "\n": vLLM's tool-message rule, as most templates print a tool result
// whole). kAuto must be resolved before (resolve_chat_content_format). An
// assistant message's tool_calls ([{"id", "type": "function", "function":
// {"name", "arguments": JSON text}}]) keep their shape with each arguments
// string parsed into its JSON value, as vLLM hands them to the template
// (transformers' templates expect a dict; Qwen2.5's prints it with tojson);
// a "tool" message keeps its other keys (role, tool_call_id).
// Errors (missing, not a non-empty list, a message without a string role,
// a non-text part, a malformed tool call or arguments that are not JSON):
// openai_fields::RequestFieldError (400, param "messages"), also more than
// max_messages messages (0: no limit; checked before anything else is
// looked at).
nlohmann::ordered_json chat_messages(const nlohmann::ordered_json* messages,
                                     int64_t max_messages = 0,
                                     ChatContentFormat format = ChatContentFormat::kString);

// A normalized message content as one text: a string as it is; a list of
// parts: their texts joined with "\n" (vLLM's echo of the last message).
std::string content_text(const nlohmann::ordered_json& content);

// The text continue_final_message continues in a normalized final message's
// content: a string as it is; a list of parts: the last part's text, as
// transformers' apply_chat_template picks it. A list without text:
// RequestFieldError (400, param "messages", transformers' message).
std::string final_message_text(const nlohmann::ordered_json& content);

// continue_final_message: rendered (with add_generation_prompt false) cut
// right after the last occurrence of the final message's content, so the
// model continues that message instead of starting a new turn;
// transformers' apply_chat_template rule: the stripped content is searched
// for; when the text at that place matches the content with only its
// leading whitespace removed it is kept whole, else only the stripped
// content is (the template trimmed it). ASCII whitespace only. A final
// message the template did not reproduce: RequestFieldError (400, param
// "messages", transformers' message).
std::string cut_after_final_message(const std::string& rendered, const std::string& final_content);

}  // namespace pagoda
