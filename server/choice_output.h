// ChoiceDelta / ChoiceAssembler: the engine's deltas as every front end
// (SSE, non-streamed JSON, /v1/ws, `pagoda generate`) frames them. One
// place turns a RequestOutput (its index already request-wide:
// prompt_index * n + sample_index, GenerationGroup's) into the choice's
// text, token ids, logprobs in the request's wire format, finish fields and
// usage, so the front ends cannot disagree on any of them.
//
// Tool calls (chat with ParsedRequest::tool_parser set): each choice's text
// goes through its ToolCallParser here, once for every front end; the
// delta's text is then the content, tool_calls the calls' deltas. With
// ParsedRequest::forced_tool (tool_choice "required" / named) the text goes
// through a ForcedToolCalls instead: no content, only calls.
//
// Echo (completions "echo", and vLLM's /generate, which always returns
// prompt + completion): a choice's first delta starts with its prompt's
// text, as vLLM's serving_completion.py streams it ("echo the prompt and
// first token"); logprobs' text_offset then starts after the prompt.
// Logprobs (sampling.logprobs set and a tokenizer): openai_logprobs.h's
// completions object {tokens, token_logprobs, top_logprobs, text_offset} or
// chat's {content: [...]}, for this delta's tokens; null otherwise.
// Prompt logprobs (sampling.prompt_logprobs set): vLLM's list
// (openai_prompt_logprobs.h), on every choice of the prompt once the engine
// request's first delta brought them; completions' echo with logprobs puts
// the echoed prompt's entries (first token null) before the completion's in
// the choice's first delta, text_offset continuing after them.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/forced_tool_calls.h"
#include "server/openai_logprobs.h"
#include "server/openai_request.h"
#include "server/tool_call_parser.h"

namespace pagoda {

struct ChoiceDelta {
  int index = 0;                   // request-wide choice index
  std::string text;                // whole UTF-8 characters; echo: prompt first
  std::vector<int32_t> token_ids;  // the completion's new ids (never the prompt's)
  // ordered_json: top logprobs keep their rank order (openai_logprobs.h).
  nlohmann::ordered_json logprobs;  // null, or the wire format for token_ids
  nlohmann::ordered_json
      prompt_logprobs;  // null, or vLLM's prompt_logprobs list for this choice's prompt
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  nlohmann::json stop_reason;     // vLLM's: the stop string, else the stop token id, else null
  int64_t prompt_tokens = 0;      // this choice's prompt
  int64_t completion_tokens = 0;  // this choice's, so far
  int64_t num_cached_tokens = 0;  // its prompt's tokens read from the prefix cache
  int engine_deltas = 1;          // engine deltas it covers (a /v1/ws seq counts these)
  std::string error;              // non-empty: the request failed (finished)
  int error_status = 400;         // RequestOutput::error_status
  // Chat with a tool parser (ParsedRequest::tool_parser): text is the
  // content only, and tool_calls the calls' deltas in OpenAI's streaming
  // shape ([{index, id, type, function: {name, arguments}}], id/type/name in
  // a call's first delta only); merged by append_choice_delta into whole
  // calls. tools_called: a call was found (finish_reason "tool_calls").
  nlohmann::json tool_calls = nlohmann::json::array();
  bool tools_called = false;
  // tool_choice "required" (ParsedRequest::forced_tool), in choices() once
  // finished: tool_calls are the calls re-read from the whole output
  // (ForcedToolCalls::final_calls: arguments as vLLM's json.dumps), or, when
  // the output is not a list of calls, this says why (the non-streamed
  // response is then vLLM's 400). Empty otherwise.
  std::string tool_call_error;
};

// Appends next (a later delta of the same choice) to into: text, token ids
// and logprob arrays concatenated, tool-call deltas merged by index (a new
// index appended, a known one's arguments concatenated), engine_deltas
// summed; usage, finish and error fields from next.
void append_choice_delta(ChoiceDelta& into, const ChoiceDelta& next);

// Tool-call deltas in OpenAI's streaming shape: a call's first delta
// {"index", "id", "type": "function", "function": {"name", "arguments"}},
// later ones {"index", "function": {"arguments"}}.
nlohmann::json tool_call_deltas_json(const std::vector<ToolCallDelta>& calls);

// The choice's finish_reason as OpenAI names it: "tool_calls" when the tool
// parser found a call (vLLM's rule, unless aborted), else
// finish_reason_str(c.finish_reason).
const char* finish_reason_name(const ChoiceDelta& c);

// vLLM's stop_reason for an engine delta: the stop string, else the stop
// token id, else null.
nlohmann::json stop_reason_json(const RequestOutput& out);

// Prompt tokens read from the prefix cache over the request's prompts:
// for each prompt the largest num_cached_tokens among its choices (the
// choices of one prompt share it; a choice not yet started reports 0).
int64_t cached_tokens(const ParsedRequest& req, const std::vector<ChoiceDelta>& choices);

// The prompt behind request-wide choice `index` (index / n); null when out
// of range.
const PromptInput* prompt_of(const ParsedRequest& req, int index);

// Single-threaded (its owner's strand or lock). req must outlive it.
class ChoiceAssembler {
 public:
  explicit ChoiceAssembler(const ParsedRequest& req);
  // The next engine delta (deltas of one choice in order) as its choice's
  // delta; also folded into choices(). An index outside [0, num_choices)
  // is passed through but not folded.
  ChoiceDelta add(const RequestOutput& d);
  // Each choice's output so far (choices()[i].index == i): every delta of
  // it appended.
  const std::vector<ChoiceDelta>& choices() const { return choices_; }
  // Usage as OpenAI counts it: each prompt once, every choice's tokens.
  int64_t prompt_tokens() const;
  int64_t completion_tokens() const;
  // Prompt tokens read from the prefix cache, each prompt once.
  int64_t num_cached_tokens() const { return cached_tokens(req_, choices_); }

 private:
  struct State {
    std::unique_ptr<ChoiceLogprobs> logprobs;
    std::unique_ptr<ToolCallParser> tools;    // chat with req.tool_parser set
    std::unique_ptr<ForcedToolCalls> forced;  // chat with req.forced_tool set
    bool echoed = false;
  };
  // Echo with logprobs: the echoed prompt's logprobs entries (and the
  // completion's offsets restart after them); null when not echoing them.
  nlohmann::ordered_json echo_logprobs(int index, State& st);
  const ParsedRequest& req_;
  std::vector<State> state_;
  // Per prompt: its prompt logprobs, once an engine delta brought them.
  std::vector<std::optional<std::vector<PromptLogprob>>> prompt_lps_;
  std::vector<ChoiceDelta> choices_;
};

}  // namespace pagoda
