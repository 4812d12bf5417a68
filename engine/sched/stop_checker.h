// Token-level stop checks for one Sequence, in the engine core, with vLLM's
// semantics (vllm/v1/core/sched/utils.py check_stop):
//  - length: num_tokens >= max_model_len or output tokens >= max_tokens;
//  - before min_tokens output tokens nothing else stops the sequence;
//  - an EOS id (unless ignore_eos) or a stop_token_ids id: finish "stop"
//    (stop_token_id set for the latter; stop_terminated set for both);
//  - guided decoding (SamplingParams::guide): the token advances the
//    sequence's automaton state; when the new state allows no text token
//    the sequence finishes "stop" (even before min_tokens: nothing else
//    could follow).
// Stop strings need the text: the OutputProcessor matches them
// (output_processor.h) and the Scheduler then ends the sequence
// (Scheduler::stop), as vLLM v1's output processor aborts the request.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "engine/sched/sequence.h"
#include "engine/sched/sequence_update.h"

namespace pagoda {

struct StopConfig {
  int64_t max_model_len = 0;
  std::vector<int32_t> eos_token_ids;
};

// Appends a sampled token to `seq` and checks the token-level stops; on a
// stop sets seq.status = kFinished and the finish fields. Returns true when
// the sequence finished.
bool append_token(Sequence& seq, int32_t token, const StopConfig& cfg);

// Marks `seq` finished with `reason` (length by capacity, abort, a stop
// string).
void finish_sequence(Sequence& seq, FinishReason reason);

// The update of `seq` without a token: its id and index, cached tokens and,
// when it finished, its finish fields (a finish without a token: capacity,
// abort, a stop string).
SequenceUpdate sequence_update(const Sequence& seq);

// The update for the token append_token just appended to `seq` (its last
// token; t is its sampled id and logprob, top-k kept only when the request
// asks for logprobs), with seq's finish fields when it finished. No prompt
// logprobs (the Scheduler adds those).
SequenceUpdate token_update(const Sequence& seq, const TokenLogprob& t);

}  // namespace pagoda
