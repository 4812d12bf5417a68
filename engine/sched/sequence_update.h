// SequenceUpdate: what the engine core (the Scheduler) reports for one
// sequence after a step, a finish or a stop (vLLM v1's EngineCoreOutput):
// the token it appended, its token-level finish, and the counts a delta
// carries. The OutputProcessor (output_processor.h) turns updates into text
// and deltas. Engine thread only.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace pagoda {

struct SequenceUpdate {
  std::string request_id;
  int index = 0;  // sample index in [0, best_of)
  // The token appended this step: its id and raw logprob, with its top-k
  // alternatives when the request asks for logprobs. Unset for a finish
  // without a token (out of KV capacity; the unforked samples of a parent
  // that finished first).
  std::optional<TokenLogprob> token;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;  // when finished
  std::optional<int32_t> stop_token_id;              // a stop_token_ids id ended it
  // The token ended the output as EOS or a stop_token_ids id: its text is
  // not shown unless include_stop_str_in_output.
  bool stop_terminated = false;
  int64_t num_cached_tokens = 0;  // Sequence::num_cached_tokens (0 if unknown)
  // The request's prompt logprobs (one per position 1..P-1), on the update
  // of its parent's first token, when the request asks for them.
  std::optional<std::vector<PromptLogprob>> prompt_logprobs;
};

}  // namespace pagoda
