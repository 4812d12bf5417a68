#include "engine/output_processor.h"

#include <algorithm>
#include <stdexcept>

namespace pagoda {
namespace {

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

std::string output_text(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                        std::span<const int32_t> output_ids, const SamplingParams& sp,
                        bool stop_terminated) {
  Detokenizer detok(tok, prompt_ids, sp.skip_special_tokens);
  std::string text;
  for (size_t i = 0; i < output_ids.size(); ++i)
    if (i + 1 < output_ids.size() || shows_token_text(stop_terminated, sp))
      text += detok.step(output_ids[i]);
  return text + detok.flush();
}

void OutputProcessor::add_request(const GenerateRequest& req) {
  if (contains(req.request_id))
    throw std::invalid_argument("OutputProcessor: request id '" + req.request_id +
                                "' is already registered");
  Request r;
  r.request_id = req.request_id;
  r.output = req.output;
  r.sampling = req.sampling;
  r.num_prompt_tokens = static_cast<int64_t>(req.prompt_token_ids.size());
  r.arrival_time = req.arrival_time;
  r.n = req.sampling.n;
  const int best_of = req.sampling.best_of.value_or(req.sampling.n);
  r.samples.reserve(static_cast<size_t>(best_of));
  for (int i = 0; i < best_of; ++i)
    r.samples.emplace_back(tok_, req.prompt_token_ids, req.sampling.skip_special_tokens);
  requests_.emplace(req.request_id, std::move(r));
}

void OutputProcessor::process(std::span<const SequenceUpdate> updates, Result& res) {
  for (const SequenceUpdate& u : updates) {
    auto it = requests_.find(u.request_id);
    if (it == requests_.end()) continue;
    Request& r = it->second;
    if (u.index < 0 || static_cast<size_t>(u.index) >= r.samples.size()) continue;
    Sample& s = r.samples[static_cast<size_t>(u.index)];
    if (s.finished) continue;
    const bool held = r.holding();
    const bool by_string = apply(r, s, u);
    if (by_string) res.stopped.emplace_back(u.request_id, u.index);
    if (!s.finished) send(r, s);
    if (held && !r.holding()) flush(r);
    if (r.num_finished == static_cast<int>(r.samples.size())) {
      res.finished.push_back(s.finish_reason);
      requests_.erase(it);
    }
  }
}

bool OutputProcessor::apply(Request& r, Sample& s, const SequenceUpdate& u) {
  const SamplingParams& sp = r.sampling;
  if (u.token) {
    s.output_ids.push_back(u.token->token_id);
    s.cumulative_logprob += u.token->logprob;
    if (sp.logprobs) s.logprobs.push_back(*u.token);
    if (!s.first_token_s)
      s.first_token_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - r.arrival_time).count();
  }
  if (u.prompt_logprobs && !r.prompt_logprobs) r.prompt_logprobs = u.prompt_logprobs;
  s.num_cached_tokens = u.num_cached_tokens;
  FinishReason reason = u.finished ? u.finish_reason : FinishReason::kNone;
  if (u.finished) s.stop_token_id = u.stop_token_id;

  // Text: a stop token's own text is not shown unless asked for.
  const size_t before = s.text.size();
  if (u.token && shows_token_text(u.stop_terminated, sp))
    s.text += s.detokenizer.step(u.token->token_id);
  if (u.finished) s.text += s.detokenizer.flush();
  const size_t new_bytes = s.text.size() - before;

  bool by_string = false;
  const auto n_out = static_cast<int64_t>(s.output_ids.size());
  if (!sp.stop.empty() && new_bytes > 0 && n_out > sp.min_tokens) {
    const std::string* which = nullptr;
    const size_t at = find_stop_string(s.text, new_bytes, sp.stop, &which);
    if (at != std::string::npos) {
      const size_t cut = sp.include_stop_str_in_output ? at + which->size() : at;
      if (cut < s.text.size()) s.text.resize(cut);
      by_string = !u.finished;  // the scheduler still runs it
      reason = FinishReason::kStop;
      s.stop_str = *which;
      s.stop_token_id.reset();
    }
  }
  if (reason != FinishReason::kNone) finish(r, s, reason);
  return by_string;
}

bool OutputProcessor::finish(Request& r, Sample& s, FinishReason reason) {
  s.finished = true;
  s.finish_reason = reason;
  ++r.num_finished;
  send(r, s);
  if (r.num_finished < static_cast<int>(r.samples.size())) return false;
  if (!r.streams()) emit_best(r);
  return true;
}

void OutputProcessor::emit_best(Request& r) {
  std::vector<Sample*> order;
  for (Sample& s : r.samples) order.push_back(&s);
  // Highest cumulative logprob first (vLLM: sorted by cumulative logprob);
  // ties keep the lower sample index.
  std::stable_sort(order.begin(), order.end(), [](const Sample* a, const Sample* b) {
    return a->cumulative_logprob > b->cumulative_logprob;
  });
  for (int k = 0; k < r.n; ++k) {
    RequestOutput d = make_delta(r, *order[static_cast<size_t>(k)], k);
    if (r.output) r.output->push(std::move(d));
  }
}

void OutputProcessor::send(Request& r, Sample& s) {
  if (!r.streams() || !r.output || r.holding() || s.final_sent) return;
  RequestOutput d = make_delta(r, s, static_cast<int>(&s - r.samples.data()));
  s.final_sent = d.finished;
  r.output->push(std::move(d));
}

void OutputProcessor::flush(Request& r) {
  for (Sample& s : r.samples)
    if (s.tokens_sent < s.output_ids.size() || (s.finished && !s.final_sent)) send(r, s);
}

RequestOutput OutputProcessor::make_delta(Request& r, Sample& s, int index) {
  RequestOutput out;
  out.request_id = r.request_id;
  out.index = index;
  const auto sent = static_cast<std::ptrdiff_t>(s.tokens_sent);
  out.token_ids.assign(s.output_ids.begin() + sent, s.output_ids.end());
  if (s.logprobs.size() == s.output_ids.size())
    out.logprobs.assign(s.logprobs.begin() + sent, s.logprobs.end());
  out.cumulative_logprob = s.cumulative_logprob;
  s.tokens_sent = s.output_ids.size();
  // Prompt logprobs once per request, on its first delta once computed.
  if (r.sampling.prompt_logprobs && !r.prompt_logprobs_sent && r.prompt_logprobs) {
    out.prompt_logprobs = *r.prompt_logprobs;
    r.prompt_logprobs_sent = true;
  }

  const std::string& text = s.text;
  const size_t hold = s.finished ? 0 : stop_hold_back(r.sampling);
  size_t end = text.size() > hold ? text.size() - hold : 0;
  // Never cut a UTF-8 character: back off to the start of a code point.
  while (end > s.text_sent && end < text.size() &&
         (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
    --end;
  if (end > s.text_sent) {
    out.text = text.substr(s.text_sent, end - s.text_sent);
    s.text_sent = end;
  }

  out.prompt_tokens = r.num_prompt_tokens;
  out.num_cached_tokens = s.num_cached_tokens;
  out.completion_tokens = static_cast<int64_t>(s.output_ids.size());
  out.first_token_s = s.first_token_s.value_or(-1.0);
  if (s.finished) {
    out.finished = true;
    out.finish_reason = s.finish_reason;
    out.stop_str = s.stop_str;
    out.stop_token_id = s.stop_token_id;
  }
  return out;
}

bool OutputProcessor::abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  Request& r = it->second;
  const bool held = r.holding();
  for (Sample& s : r.samples)
    if (!s.finished) finish(r, s, FinishReason::kAbort);
  if (held) flush(r);
  requests_.erase(it);
  return true;
}

int64_t OutputProcessor::abort_all() {
  std::vector<std::string> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (const std::string& id : ids) abort(id);
  return static_cast<int64_t>(ids.size());
}

}  // namespace pagoda
