// The OpenAI response side of the protocol layer: engine deltas
// (RequestOutput) → OpenAI's wire format, as vLLM's serving_completion.py /
// serving_chat.py write it. Pure formatting; no I/O.
//
// Non-streamed: a "text_completion" / "chat.completion" object with id,
// created, model, choices[i] {index, text | message{role, content},
// logprobs (null unless asked for; see openai_logprobs.h), finish_reason,
// stop_reason} for every choice (prompts × n, in index order) and usage
// {prompt_tokens (each prompt once), completion_tokens (all choices),
// total_tokens}. Completions with echo: each choice's text starts with its
// prompt's text (streamed: in the choice's first chunk, with its first
// tokens, as vLLM streams it).
// Streamed (Server-Sent Events, one `data: <json>\n\n` per chunk):
// "text_completion" / "chat.completion.chunk" chunks, each for one choice
// (its index); chat's first chunk per choice has delta {role: "assistant",
// content: ""}; a choice's last chunk carries finish_reason/stop_reason;
// with stream_options.include_usage every chunk has "usage": null and,
// after all choices finished, a final chunk with "choices": [] carries the
// usage; then `data: [DONE]\n\n`. With stream_options.continuous_usage_stats
// too (vLLM extension), each choice chunk's "usage" is instead that choice's
// usage so far: {prompt_tokens (its prompt), completion_tokens (generated so
// far; 0 in chat's role chunk and echo's prompt chunk), total_tokens}.
// /generate (vLLM's api_server): {"text": [prompt + completion, ...]};
// streamed, the same object with the texts so far after every update, each
// followed by a NUL byte.
// With vLLM's return_token_ids extension, choices also carry token_ids (and,
// non-streamed, prompt_token_ids).
// Prompt logprobs (SamplingParams::prompt_logprobs): completions choices'
// and chat's top-level `prompt_logprobs` (server/openai_prompt_logprobs.h),
// non-streamed only (vLLM refuses prompt_logprobs with stream=true).
// Completions with echo and logprobs: the logprobs object starts with the
// prompt's tokens (the first one's logprob null), in each choice's first
// delta (server/choice_output.h).
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/choice_output.h"
#include "server/openai_error.h"
#include "server/openai_request.h"

namespace pagoda {

// `data: <json>\n\n`.
std::string sse_event(const nlohmann::ordered_json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Content-Type of a streamed response: SSE, or JSON for /generate.
const char* stream_content_type(const ParsedRequest& req);

// The whole response body for a non-streamed request from each choice's
// output (GenerationGroup::choices(): choices[i].index == i; all finished;
// text, logprobs and echo already assembled by choice_output.h). An output
// with error set must go through error_for_output instead. Keys come in the
// order vLLM writes them (ordered_json), top logprobs in rank order.
nlohmann::ordered_json completion_response(const ParsedRequest& req,
                                           const std::vector<ChoiceDelta>& choices);
// The same from engine outputs, each a whole choice (index = request-wide
// choice index), assembled by a ChoiceAssembler first.
nlohmann::ordered_json completion_response(const ParsedRequest& req,
                                           const std::vector<RequestOutput>& choices);
nlohmann::ordered_json completion_response(const ParsedRequest& req, const RequestOutput& merged);

// The client error for an engine-failed request (error non-empty).
OpenAIError error_for_output(const RequestOutput& out);
OpenAIError error_for_output(const ChoiceDelta& out);

// Frames one request's choice deltas (GenerationGroup::drain()) as stream
// text, keeping what the stream has said so far (role chunks, usage).
// Single-threaded use (the connection's strand).
class StreamFormatter {
 public:
  explicit StreamFormatter(const ParsedRequest& req);
  // The text to send before any delta: chat's role chunks; "" otherwise.
  std::string begin();
  // The text for a batch of deltas (coalesced: consecutive deltas of one
  // choice become one chunk). After the last choice's finished delta: the
  // usage chunk when asked for, and `data: [DONE]`. An error delta becomes
  // an error event then [DONE].
  std::string format(const std::vector<ChoiceDelta>& deltas);
  bool done() const { return done_; }

 private:
  struct Choice {
    std::string text;       // /generate: all text so far (prompt first)
    bool received = false;  // a delta of this choice has arrived
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t num_cached_tokens = 0;
    bool finished = false;
  };
  nlohmann::ordered_json chunk(nlohmann::ordered_json choice) const;
  std::string format_one(const ChoiceDelta& d);
  std::string finish_stream();
  std::string generate_update() const;

  const ParsedRequest& req_;
  std::vector<Choice> choices_;
  int finished_count_ = 0;
  bool done_ = false;
};

}  // namespace pagoda
