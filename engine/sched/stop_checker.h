// Per-token stop checks and delta building for one Sequence, with vLLM's
// semantics (vllm/v1/core/sched/utils.py check_stop, vllm/v1/engine/
// detokenizer.py check_stop_strings / get_next_output_text):
//  - length: num_tokens >= max_model_len or output tokens >= max_tokens;
//  - before min_tokens output tokens nothing else stops the sequence;
//  - an EOS id (unless ignore_eos) or a stop_token_ids id: finish "stop"
//    (stop_token_id set for the latter); the stop token's text is not added
//    unless include_stop_str_in_output;
//  - stop strings matched on the detokenized output text (they may span
//    tokens): the text is cut before the match (or after it with
//    include_stop_str_in_output) and finish "stop" with stop_str set; while
//    streaming, the last (longest stop string - 1) bytes are held back so a
//    partial match is never emitted;
//  - guided decoding (SamplingParams::guide): the token advances the
//    sequence's automaton state; when the new state allows no text token
//    the sequence finishes "stop" with the token's text kept (even before
//    min_tokens: nothing else could follow).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "engine/sched/sequence.h"

namespace pagoda {

struct StopConfig {
  int64_t max_model_len = 0;
  std::vector<int32_t> eos_token_ids;
};

// Appends a sampled token to `seq`, detokenizes it and checks every stop
// condition; on a stop sets seq.status = kFinished and the finish fields.
// Returns true when the sequence finished.
bool append_token(Sequence& seq, int32_t token, const StopConfig& cfg);

// Marks `seq` finished with `reason` (length by capacity, abort).
void finish_sequence(Sequence& seq, FinishReason reason);

// The delta since the last one: the sequence's index, new token ids (and
// their logprobs when kept), the prompt logprobs on the group's first delta
// (when asked for and all computed), new text (whole UTF-8 characters; the
// stop-string hold-back kept unless finished), cumulative logprob, usage
// counts, and the finish fields when finished. Advances the sent offsets.
RequestOutput make_delta(Sequence& seq);

}  // namespace pagoda
