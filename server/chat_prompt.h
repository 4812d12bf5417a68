// The chat side of a request's prompt: messages normalized for the
// template, and the rendered text cut after the final message when the
// request continues it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/chat_content_format.h"

namespace pagoda {

// The request's "messages" (null when absent or null) rebuilt as vLLM's
// parse_chat_messages hands them to the template
// (vllm/renderers/chat_utils/: _parse_chat_message_content, then
// _postprocess_messages): {"role", "content"} with the content in the
// template's content format, then only the keys vLLM keeps, in its order:
// an assistant's "tool_calls" (dropped when empty) and "reasoning" (also
// as "reasoning_content"; the client's "reasoning_content" is not read), a
// tool message's "tool_call_id", any message's "name" and "task" when they
// are strings, a developer's "tools" (null when absent); every other key is
// dropped, as vLLM drops it. kString: null or missing → "" (vLLM renders
// both as ""), a list of {"type": "text", "text"} parts → the texts joined
// with "\n". kOpenAI: every content a list of {"type": "text", "text"}
// parts (a string → one part, null or missing → no part), except a "tool"
// message's, which stays a string (the parts' texts joined with "\n":
// vLLM's tool-message rule, as most templates print a tool result whole).
// kAuto must be resolved before (resolve_chat_content_format). Each tool
// call keeps its shape with its arguments as a JSON object, as vLLM hands
// them to the template (transformers' templates expect a dict; Qwen2.5's
// prints it with tojson): a string parsed; missing, null, empty, not JSON or
// not an object: {}.
// Errors (missing, not a non-empty list, a message without a string role,
// a non-text part, a malformed tool call): openai_fields::RequestFieldError
// (400; param "messages", or "tool_calls" with vLLM's words for a call that
// is not an object or not of type "function"), also more than max_messages
// messages (0: no limit; checked before anything else is looked at).
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
