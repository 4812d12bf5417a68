#include "engine/sched/stop_checker.h"

#include <algorithm>
#include <chrono>

namespace pagoda {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// vLLM's check_stop_strings: search only where a match could end in the new
// text. Returns the index of the match's start or npos; sets *which.
size_t find_stop_string(const std::string& text, size_t new_bytes,
                        const std::vector<std::string>& stops, const std::string** which) {
  for (const std::string& s : stops) {
    if (s.empty()) continue;
    size_t from = text.size() >= new_bytes + s.size() ? text.size() - new_bytes - s.size() + 1 : 0;
    size_t at = text.find(s, from);
    if (at != std::string::npos) {
      *which = &s;
      return at;
    }
  }
  return std::string::npos;
}

size_t stop_hold_back(const SamplingParams& sp) {
  if (sp.include_stop_str_in_output) return 0;
  size_t longest = 0;
  for (const std::string& s : sp.stop) longest = std::max(longest, s.size());
  return longest ? longest - 1 : 0;
}

}  // namespace

void finish_sequence(Sequence& seq, FinishReason reason) {
  seq.status = SequenceStatus::kFinished;
  seq.finish_reason = reason;
}

bool append_token(Sequence& seq, int32_t token, const StopConfig& cfg) {
  const SamplingParams& sp = seq.sampling;
  seq.token_ids.push_back(token);
  if (!seq.first_token_s) {
    seq.first_token_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - seq.arrival_time).count();
  }
  const int64_t n_out = seq.num_output_tokens();

  // Guided decoding: advance the automaton on a text token (EOS ends the
  // output below); when no text token can follow (the pattern can only
  // end, or the vocabulary cannot continue it) the output is complete.
  bool guide_done = false;
  if (sp.guide && seq.guide_state >= 0 && !contains(cfg.eos_token_ids, token)) {
    seq.guide_state = sp.guide->advance(seq.guide_state, token);
    guide_done = seq.guide_state < 0 || sp.guide->mask(seq.guide_state).count == 0;
  }

  // Token-level checks (vLLM check_stop order: length first).
  FinishReason reason = FinishReason::kNone;
  bool stop_terminated = false;
  if (seq.num_tokens() >= cfg.max_model_len || n_out >= seq.max_tokens) {
    reason = FinishReason::kLength;
  } else if (n_out >= sp.min_tokens) {
    if (!sp.ignore_eos && contains(cfg.eos_token_ids, token)) {
      reason = FinishReason::kStop;
      stop_terminated = true;
    } else if (contains(sp.stop_token_ids, token)) {
      reason = FinishReason::kStop;
      stop_terminated = true;
      seq.stop_token_id = token;
    }
  }
  if (reason == FinishReason::kNone && guide_done) reason = FinishReason::kStop;

  // Text: the stop token itself is not shown unless asked for.
  size_t before = seq.output_text.size();
  if (!stop_terminated || sp.include_stop_str_in_output) seq.output_text += seq.detokenizer.step(token);
  if (reason != FinishReason::kNone) seq.output_text += seq.detokenizer.flush();
  size_t new_bytes = seq.output_text.size() - before;

  if (!sp.stop.empty() && new_bytes > 0 && n_out > sp.min_tokens) {
    const std::string* which = nullptr;
    size_t at = find_stop_string(seq.output_text, new_bytes, sp.stop, &which);
    if (at != std::string::npos) {
      size_t cut = sp.include_stop_str_in_output ? at + which->size() : at;
      if (cut < seq.output_text.size()) seq.output_text.resize(cut);
      reason = FinishReason::kStop;
      seq.stop_str = *which;
      seq.stop_token_id.reset();
    }
  }
  if (reason != FinishReason::kNone) finish_sequence(seq, reason);
  return reason != FinishReason::kNone;
}

RequestOutput make_delta(Sequence& seq) {
  RequestOutput out;
  out.request_id = seq.request_id;
  out.index = seq.index;
  auto ids = seq.output_ids();
  out.token_ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(seq.tokens_sent), ids.end());
  if (seq.logprobs.size() == ids.size())
    out.logprobs.assign(seq.logprobs.begin() + static_cast<std::ptrdiff_t>(seq.tokens_sent), seq.logprobs.end());
  out.cumulative_logprob = seq.cumulative_logprob;
  seq.tokens_sent = ids.size();
  // Prompt logprobs once per request, on its first delta, when complete
  // (the parent computed them all: they are ready once it sampled).
  if (seq.sampling.prompt_logprobs && seq.group && !seq.group->prompt_logprobs_sent) {
    const Sequence& parent = *seq.group->seqs.front();
    const int64_t positions = std::max<int64_t>(parent.num_prompt_tokens - 1, 0);
    if (static_cast<int64_t>(parent.prompt_logprobs.size()) == positions) {
      out.prompt_logprobs = parent.prompt_logprobs;
      seq.group->prompt_logprobs_sent = true;
    }
  }

  const std::string& text = seq.output_text;
  size_t hold = seq.finished() ? 0 : stop_hold_back(seq.sampling);
  size_t end = text.size() > hold ? text.size() - hold : 0;
  // Never cut a UTF-8 character: back off to the start of a code point.
  while (end > seq.text_sent && end < text.size() &&
         (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
    --end;
  if (end > seq.text_sent) {
    out.text = text.substr(seq.text_sent, end - seq.text_sent);
    seq.text_sent = end;
  }

  out.prompt_tokens = seq.num_prompt_tokens;
  out.num_cached_tokens = std::max<int64_t>(seq.num_cached_tokens, 0);
  out.completion_tokens = seq.num_output_tokens();
  out.first_token_s = seq.first_token_s.value_or(-1.0);
  if (seq.finished()) {
    out.finished = true;
    out.finish_reason = seq.finish_reason;
    out.stop_str = seq.stop_str;
    out.stop_token_id = seq.stop_token_id;
  }
  return out;
}

}  // namespace pagoda
