// The two messages that cross between network threads and the engine thread:
// GenerateRequest (network → engine, through the request queue) and
// RequestOutput (engine → connection, through the request's OutputChannel).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sample/sampling_params.h"

namespace pagoda {

class OutputChannel;

enum class FinishReason { kNone, kStop, kLength, kAbort };
// OpenAI's finish_reason string: "stop", "length", "abort"; "" for kNone.
const char* finish_reason_str(FinishReason r);

struct GenerateRequest {
  // The engine's key for the request (abort_request, RequestOutput): unique
  // among the requests in the engine (admission refuses a duplicate).
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;  // already tokenized (BOS included)
  SamplingParams sampling;
  // vLLM's cache_salt: only requests with the same salt share prefix-cache
  // blocks ("" = unsalted; BlockManager::root_for_salt).
  std::string cache_salt;
  std::shared_ptr<OutputChannel> output;  // where deltas go
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();
  // The id the client named, for logs ("Finished request ..."): the server
  // suffixes request_id to keep it unique when clients reuse theirs (as
  // vLLM v1 keeps external_req_id beside its internal id). Empty: request_id.
  // Last, so aggregate initialisers of the fields above keep their meaning.
  std::string external_request_id;
};

// Log-probability of one generated token and, when asked, the top-k
// alternatives at that position (natural log, raw model distribution).
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely first; size k
  // The token's 1-based rank in the raw distribution (the number of ids
  // whose logprob is >= its own, itself included; vLLM's
  // batched_count_greater_than): a prompt-logprob score row's
  // (DeviceSampleRow::score_token, PromptLogprob::rank), and a sampled
  // token's when logprobs were asked for (SamplingParams::logprobs set);
  // 0 otherwise.
  int64_t rank = 0;
};

// vLLM's prompt logprob of one prompt position p >= 1: the raw
// log-softmax (natural log) of prompt token p given tokens [0, p), its rank
// in that distribution (1-based: the number of tokens whose logprob is >=
// its own, itself included, as vLLM's) and the k most likely tokens (their ranks are
// 1..k in this order; most likely first, ties to the lower id).
struct PromptLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int64_t rank = 1;
  std::vector<std::pair<int32_t, float>> top;  // size k
};

// One delta of one request's output. Deltas concatenate: the joined
// token_ids/text of all deltas are the completion. The last delta has
// finished == true (and may carry no new tokens).
struct RequestOutput {
  std::string request_id;
  // Choice index in [0, n). With n > 1 each choice's deltas arrive
  // interleaved, each choice ends with its own finished delta, and the
  // channel is finished once all n choices are.
  int index = 0;
  std::vector<int32_t> token_ids; // new token ids
  std::string text;               // new text: whole UTF-8 characters only
  // Parallel to token_ids when SamplingParams::logprobs is set, else empty.
  std::vector<TokenLogprob> logprobs;
  double cumulative_logprob = 0.0; // sum of the sampled tokens' logprobs so far
  // SamplingParams::prompt_logprobs set: on the request's first delta only
  // (whichever choice it is), one entry per prompt position 1..P-1 (position
  // 0 has none: vLLM's leading null); unset on every other delta.
  std::optional<std::vector<PromptLogprob>> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // Which stop string or stop token id ended it (vLLM's stop_reason), if any.
  std::optional<std::string> stop_str;
  std::optional<int32_t> stop_token_id;
  int64_t prompt_tokens = 0;      // usage, valid on every delta
  int64_t completion_tokens = 0;  // total so far
  // Prompt tokens whose K/V came from the prefix cache (vLLM's
  // RequestOutput.num_cached_tokens; usage.prompt_tokens_details.
  // cached_tokens), valid on every delta; 0 before the first step.
  int64_t num_cached_tokens = 0;
  std::string error;              // non-empty: the request failed (finished)
  // The HTTP status an API layer reports for `error`: 400 (the request is
  // invalid), 503 (the server is shutting down and takes no new requests).
  int error_status = 400;
  // Engine-side timings (seconds since arrival), for metrics.
  double first_token_s = -1.0;
};

}  // namespace pagoda
