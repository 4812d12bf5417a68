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

void GenerationGroup::submit() {
  if (submitted_) return;
  submitted_ = true;
  // Channels are all set up before the first submit: a fast engine may
  // answer before the loop ends.
  for (size_t i = 0; i < req_.prompts.size(); ++i) {
    auto r = std::make_unique<GenerateRequest>();
    r->request_id = subs_[i].request_id;
    r->prompt_token_ids = req_.prompts[i].token_ids;
    r->sampling = req_.sampling;
    r->sampling.max_tokens = req_.prompts[i].max_tokens;
    r->output = subs_[i].channel;
    engine_.add_request(std::move(r));
  }
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
  for (size_t i = 0; i < subs_.size(); ++i) {
    bool all_done = true;
    for (int j = 0; j < n_; ++j) all_done = all_done && finished_[i * static_cast<size_t>(n_) + static_cast<size_t>(j)];
    if (!all_done) engine_.abort_request(subs_[i].request_id);
  }
}

}  // namespace pagoda
