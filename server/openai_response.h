// The OpenAI response side of the protocol layer: engine deltas
// (RequestOutput) → OpenAI's wire format, as vLLM's serving_completion.py /
// serving_chat.py write it. Pure formatting; no I/O.
//
// Non-streamed: a "text_completion" / "chat.completion" object with id,
// created, model, choices[0] {index, text | message{role, content},
// logprobs: null, finish_reason, stop_reason} and usage {prompt_tokens,
// completion_tokens, total_tokens}.
// Streamed (Server-Sent Events, one `data: <json>\n\n` per chunk):
// "text_completion" / "chat.completion.chunk" chunks; chat's first chunk has
// delta {role: "assistant", content: ""}; the last content chunk carries
// finish_reason/stop_reason; with stream_options.include_usage every chunk
// has "usage": null and a final chunk with "choices": [] carries the usage;
// then `data: [DONE]\n\n`.
// With vLLM's return_token_ids extension, choices also carry token_ids (and,
// non-streamed, prompt_token_ids).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/openai_error.h"
#include "server/openai_request.h"

namespace pagoda {

// `data: <json>\n\n`.
std::string sse_event(const nlohmann::json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// The whole response body for a non-streamed request from its merged
// output (all deltas concatenated; finished). An output with error set must
// go through error_for_output instead.
nlohmann::json completion_response(const ParsedRequest& req, const RequestOutput& merged);

// The client error for an engine-failed request (output.error non-empty).
OpenAIError error_for_output(const RequestOutput& out);

// vLLM's stop_reason: the stop string, else the stop token id, else null.
nlohmann::json stop_reason_json(const RequestOutput& out);

// Turns one request's deltas into SSE text, keeping what the stream has said
// so far (role chunk, usage). Single-threaded use (the connection's strand).
class StreamFormatter {
 public:
  explicit StreamFormatter(const ParsedRequest& req) : req_(req) {}
  // The SSE text to send before any delta: chat's role chunk, "" for
  // completions.
  std::string begin();
  // The SSE text for a batch of deltas (coalesced: any number, in order,
  // become one chunk).
  // After the finished delta: the final chunk, the usage chunk when asked
  // for, and `data: [DONE]`. An error delta becomes an error event then
  // [DONE].
  std::string format(const std::vector<RequestOutput>& deltas);
  bool done() const { return done_; }

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  std::string format_one(const RequestOutput& d);

  const ParsedRequest& req_;
  bool done_ = false;
};

}  // namespace pagoda
