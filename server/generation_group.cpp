#include "server/generation_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "engine/output_processor.h"

namespace pagoda {
namespace {

// A process-wide serial number for engine request ids: a client's
// request_id is not unique (two requests may name the same one, and a
// client's id may look like another's derived id), so each engine request
// id ends with "#<16 hex digits of this counter>". Ids that end so are
// distinct whatever precedes the suffix, and a group aborts only the
// requests it added (an abort by a client's id could otherwise reach
// another request that uses it; vLLM likewise suffixes its internal ids).
std::string engine_id(const std::string& base) {
  static std::atomic<uint64_t> serial{0};
  return fmt::format("{}#{:016x}", base, serial.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

GenerationGroup::GenerationGroup(ParsedRequest req, EngineHandle& engine,
                                 std::function<void()> notify)
    : req_(std::move(req)),
      engine_(engine),
      notify_(notify),
      assembler_(req_),
      n_(req_.sampling.n) {
  finished_.assign(static_cast<size_t>(req_.num_choices()), false);
  const bool batched = req_.prompts.size() > 1;
  for (size_t i = 0; i < req_.prompts.size(); ++i) {
    Sub s;
    s.external_id = batched ? fmt::format("{}-{}", req_.request_id, i) : req_.request_id;
    s.request_id = engine_id(s.external_id);
    s.channel = std::make_shared<OutputChannel>();
    s.channel->set_notifier(notify);
    s.first_index = static_cast<int>(i) * n_;
    if (req_.beam_search) {
      BeamSearchParams p = *req_.beam_search;
      p.max_tokens = req_.prompts[i].max_tokens;
      s.beam = std::make_shared<Beam>();
      s.beam->search = std::make_unique<BeamSearch>(req_.prompts[i].token_ids, std::move(p));
    }
    subs_.push_back(s);
  }
}

std::optional<SubmitRefusal> GenerationGroup::submit() {
  if (submitted_) return std::nullopt;
  submitted_ = true;
  // Channels are all set up before the submit: a fast engine may answer
  // before it returns.
  std::vector<std::unique_ptr<GenerateRequest>> batch;
  batch.reserve(req_.prompts.size());
  for (size_t i = 0; i < req_.prompts.size() && req_.beam_search; ++i)
    for (auto& r : beam_step_requests(subs_[i])) batch.push_back(std::move(r));
  for (size_t i = 0; i < req_.prompts.size() && !req_.beam_search; ++i) {
    auto r = std::make_unique<GenerateRequest>();
    r->request_id = subs_[i].request_id;
    r->external_request_id = subs_[i].external_id;
    r->prompt_token_ids = req_.prompts[i].token_ids;
    r->sampling = req_.sampling;
    r->sampling.max_tokens = req_.prompts[i].max_tokens;
    r->cache_salt = req_.cache_salt;
    r->output = subs_[i].channel;
    batch.push_back(std::move(r));
  }
  const Admission a = engine_.add_requests(batch);
  if (a == Admission::kAccepted) return std::nullopt;
  refused_ = true;
  const int64_t limit = engine_.max_num_waiting_requests();
  if (a == Admission::kShuttingDown)
    return SubmitRefusal{make_error(503, "The server is shutting down"), 0};
  if (a == Admission::kTooLarge)
    return SubmitRefusal{
        bad_request(fmt::format("The request needs {} engine requests (one per prompt), more than "
                                "the waiting queue holds (--max-num-waiting-requests {})",
                                batch.size(), limit),
                    "prompt"),
        0};
  return SubmitRefusal{
      make_error(503, fmt::format("The server is overloaded: the waiting queue is full "
                                  "(--max-num-waiting-requests {}); retry later",
                                  limit)),
      kRetryAfterSeconds};
}

std::vector<std::unique_ptr<GenerateRequest>> GenerationGroup::beam_step_requests(Sub& sub) {
  Beam& b = *sub.beam;
  std::vector<std::unique_ptr<GenerateRequest>> batch;
  b.ids.clear();
  b.channels.clear();
  b.outputs.assign(b.search->pending().size(), RequestOutput{});
  for (size_t j = 0; j < b.search->pending().size(); ++j) {
    auto r = std::make_unique<GenerateRequest>();
    r->external_request_id = fmt::format("{}-beam{}-{}", sub.external_id, b.step, j);
    r->request_id = engine_id(r->external_request_id);
    r->prompt_token_ids = b.search->pending()[j];
    r->sampling.temperature = 0.0f;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = 1;
    r->sampling.logprobs = b.search->k();
    r->cache_salt = req_.cache_salt;  // the beams share cached prefixes under their salt only
    r->output = std::make_shared<OutputChannel>();
    r->output->set_notifier(notify_);
    b.ids.push_back(r->request_id);
    b.channels.push_back(r->output);
    batch.push_back(std::move(r));
  }
  ++b.step;
  return batch;
}

void GenerationGroup::fail_with(const std::string& error, int status, int index,
                                std::vector<ChoiceDelta>& out) {
  RequestOutput d;
  d.index = index;
  d.finished = true;
  d.finish_reason = FinishReason::kAbort;
  d.error = error;
  d.error_status = status;
  ChoiceDelta c = assembler_.add(d);
  if (!failed_) {
    failed_ = true;
    error_ = c;
  }
  out.push_back(std::move(c));
}

void GenerationGroup::drain_beam(Sub& sub, std::vector<ChoiceDelta>& out) {
  Beam& b = *sub.beam;
  if (b.done || failed_) return;
  bool complete = true;
  for (size_t j = 0; j < b.channels.size(); ++j) {
    for (RequestOutput& d : b.channels[j]->drain()) {
      if (!d.error.empty()) {
        b.done = true;
        fail_with(d.error, d.error_status, sub.first_index, out);
        return;
      }
      merge_delta(b.outputs[j], d);
    }
    // Complete from the drained deltas themselves: the channel's finished()
    // can turn true between drain() and a check of it, with the final delta
    // (the step's logprobs) still pending.
    complete = complete && b.outputs[j].finished;
  }
  if (!complete) return;
  std::vector<std::vector<std::pair<int32_t, float>>> lists;
  for (const RequestOutput& o : b.outputs) {
    if (o.logprobs.empty()) {
      b.done = true;
      fail_with("beam search: a step's request returned no logprobs", 500, sub.first_index, out);
      return;
    }
    lists.push_back(o.logprobs[0].top);
  }
  b.search->advance(lists);
  if (!b.search->done()) {
    auto batch = beam_step_requests(sub);
    const Admission a = engine_.add_requests(batch);
    if (a != Admission::kAccepted) {
      b.done = true;
      b.ids.clear();
      fail_with(a == Admission::kShuttingDown
                    ? "The server is shutting down"
                    : "The server is overloaded: the waiting queue is full; retry later",
                503, sub.first_index, out);
    }
    return;
  }
  b.done = true;
  b.ids.clear();
  const BeamSearchParams& p = b.search->params();
  const std::vector<BeamHypothesis> beams = b.search->result();
  const auto prompt_tokens = static_cast<int64_t>(
      req_.prompts[static_cast<size_t>(sub.first_index / n_)].token_ids.size());
  for (int i = 0; i < n_; ++i) {
    RequestOutput d;
    d.request_id = sub.request_id;
    d.index = sub.first_index + i;
    d.finished = true;
    d.finish_reason = FinishReason::kLength;
    d.prompt_tokens = prompt_tokens;
    if (static_cast<size_t>(i) < beams.size()) {
      const BeamHypothesis& h = beams[static_cast<size_t>(i)];
      d.token_ids = h.token_ids;
      d.cumulative_logprob = h.cumulative_logprob;
      d.completion_tokens = static_cast<int64_t>(h.token_ids.size());
      const int32_t last = h.token_ids.empty() ? -1 : h.token_ids.back();
      const bool ended_by_eos =
          std::find(p.eos_token_ids.begin(), p.eos_token_ids.end(), last) != p.eos_token_ids.end();
      // As a sampled completion's text: decoded against the prompt (a
      // leading "▁" after it is a space), the eos / stop token's text left
      // out unless include_stop_str_in_output.
      if (req_.tokenizer)
        d.text = output_text(*req_.tokenizer,
                             req_.prompts[static_cast<size_t>(sub.first_index / n_)].token_ids,
                             h.token_ids, req_.sampling, ended_by_eos);
      if (ended_by_eos) {
        d.finish_reason = FinishReason::kStop;
        const auto& stops = req_.sampling.stop_token_ids;
        if (std::find(stops.begin(), stops.end(), last) != stops.end()) d.stop_token_id = last;
      }
    }
    if (!finished_[static_cast<size_t>(d.index)]) {
      finished_[static_cast<size_t>(d.index)] = true;
      ++finished_count_;
    }
    if (tap_) tap_(d);
    out.push_back(assembler_.add(d));
  }
}

std::vector<ChoiceDelta> GenerationGroup::drain() {
  std::vector<ChoiceDelta> out;
  if (req_.beam_search) {
    for (Sub& s : subs_) drain_beam(s, out);
    return out;
  }
  for (const Sub& s : subs_) {
    for (RequestOutput& d : s.channel->drain()) {
      if (d.index < 0 || d.index >= n_) {
        // A choice index outside [0, n) would be an engine bug; fail the
        // request rather than index out of range.
        d.error = fmt::format("engine returned choice index {} for n={}", d.index, n_);
        d.error_status = 500;
        d.finished = true;
        d.index = 0;
      }
      d.index += s.first_index;
      if (d.finished && !finished_[static_cast<size_t>(d.index)]) {
        finished_[static_cast<size_t>(d.index)] = true;
        ++finished_count_;
      }
      if (tap_) tap_(d);
      ChoiceDelta c = assembler_.add(d);
      if (!c.error.empty() && !failed_) {
        failed_ = true;
        error_ = c;
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

void GenerationGroup::abort() {
  if (!submitted_ || refused_) return;
  std::vector<std::string> ids;
  if (req_.beam_search) {
    for (Sub& s : subs_)
      if (!s.beam->done) ids.insert(ids.end(), s.beam->ids.begin(), s.beam->ids.end());
    engine_.abort_requests(std::move(ids));
    return;
  }
  for (size_t i = 0; i < subs_.size(); ++i) {
    bool all_done = true;
    for (int j = 0; j < n_; ++j) all_done = all_done && finished_[i * static_cast<size_t>(n_) + static_cast<size_t>(j)];
    if (!all_done) ids.push_back(subs_[i].request_id);
  }
  engine_.abort_requests(std::move(ids));
}

}  // namespace pagoda
