#include "engine/sched/stop_checker.h"

#include <algorithm>

namespace pagoda {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

void finish_sequence(Sequence& seq, FinishReason reason) {
  seq.status = SequenceStatus::kFinished;
  seq.finish_reason = reason;
}

bool append_token(Sequence& seq, int32_t token, const StopConfig& cfg) {
  const SamplingParams& sp = seq.sampling;
  seq.token_ids.push_back(token);
  const int64_t n_out = seq.num_output_tokens();

  // Guided decoding: advance the automaton on a text token (EOS ends the
  // output below); when no text token can follow (the pattern can only
  // end, or the vocabulary cannot continue it) the output is complete.
  bool guide_done = false;
  if (sp.guide && seq.guide_state >= 0 && !contains(cfg.eos_token_ids, token)) {
    seq.guide_state = sp.guide->advance(seq.guide_state, token);
    guide_done = !sp.guide->can_continue(seq.guide_state);
  }

  // vLLM check_stop order: length first.
  FinishReason reason = FinishReason::kNone;
  if (seq.num_tokens() >= cfg.max_model_len || n_out >= seq.max_tokens) {
    reason = FinishReason::kLength;
  } else if (n_out >= sp.min_tokens) {
    if (!sp.ignore_eos && contains(cfg.eos_token_ids, token)) {
      reason = FinishReason::kStop;
      seq.stop_terminated = true;
    } else if (contains(sp.stop_token_ids, token)) {
      reason = FinishReason::kStop;
      seq.stop_terminated = true;
      seq.stop_token_id = token;
    }
  }
  if (reason == FinishReason::kNone && guide_done) reason = FinishReason::kStop;
  if (reason != FinishReason::kNone) finish_sequence(seq, reason);
  return reason != FinishReason::kNone;
}

SequenceUpdate sequence_update(const Sequence& seq) {
  SequenceUpdate u;
  u.request_id = seq.request_id;
  u.index = seq.index;
  u.num_cached_tokens = std::max<int64_t>(seq.num_cached_tokens, 0);
  if (seq.finished()) {
    u.finished = true;
    u.finish_reason = seq.finish_reason;
    u.stop_token_id = seq.stop_token_id;
    u.stop_terminated = seq.stop_terminated;
  }
  return u;
}

SequenceUpdate token_update(const Sequence& seq, const TokenLogprob& t) {
  SequenceUpdate u = sequence_update(seq);
  u.token = seq.sampling.logprobs ? t : TokenLogprob{t.token_id, t.logprob, {}, 0};
  return u;
}

}  // namespace pagoda
