#include "server/generation_group.h"

#include <utility>

#include <fmt/format.h>

namespace pagoda {

GenerationGroup::GenerationGroup(ParsedRequest req, EngineHandle& engine,
                                 std::function<void()> notify)
    : req_(std::move(req)), engine_(engine), assembler_(req_), n_(req_.sampling.n) {
  finished_.assign(static_cast<size_t>(req_.num_choices()), false);
  const bool batched = req_.prompts.size() > 1;
  for (size_t i = 0; i < req_.prompts.size(); ++i) {
    Sub s;
    s.request_id = batched ? fmt::format("{}-{}", req_.request_id, i) : req_.request_id;
    s.channel = std::make_shared<OutputChannel>();
    s.channel->set_notifier(notify);
    s.first_index = static_cast<int>(i) * n_;
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
  for (size_t i = 0; i < req_.prompts.size(); ++i) {
    auto r = std::make_unique<GenerateRequest>();
    r->request_id = subs_[i].request_id;
    r->prompt_token_ids = req_.prompts[i].token_ids;
    r->sampling = req_.sampling;
    r->sampling.max_tokens = req_.prompts[i].max_tokens;
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

std::vector<ChoiceDelta> GenerationGroup::drain() {
  std::vector<ChoiceDelta> out;
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
  for (size_t i = 0; i < subs_.size(); ++i) {
    bool all_done = true;
    for (int j = 0; j < n_; ++j) all_done = all_done && finished_[i * static_cast<size_t>(n_) + static_cast<size_t>(j)];
    if (!all_done) ids.push_back(subs_[i].request_id);
  }
  engine_.abort_requests(std::move(ids));
}

}  // namespace pagoda
