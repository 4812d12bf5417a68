#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/engine.h"
#include "engine/output_channel.h"

namespace pagoda {
namespace {

constexpr float kNone = -1.0e9f;  // HF's score of an empty or excluded slot

struct Candidate {
  int beam = 0;       // running beam it extends
  int32_t token = 0;  // next token
  float logprob = 0.0f;
  float acc = 0.0f;  // cumulative logprob with it
  int order = 0;     // position in the flattened (beam, rank) list: ties keep that order
};

float length_norm(int64_t length, float penalty) {
  return static_cast<float>(std::pow(static_cast<double>(length), static_cast<double>(penalty)));
}

}  // namespace

BeamSearch::BeamSearch(std::vector<int32_t> prompt, BeamSearchParams params)
    : prompt_(std::move(prompt)), p_(std::move(params)) {
  if (p_.beam_width < 1) throw std::invalid_argument("beam search: beam_width must be >= 1");
  if (p_.max_tokens < 1) throw std::invalid_argument("beam search: max_tokens must be >= 1");
  k_ = beam_candidates(p_.beam_width, p_.eos_token_ids.size());
  // HF starts num_beams copies of the prompt, all but the first at -1e9:
  // only the first one's continuations can win, so one beam is the same.
  running_.resize(1);
  slots_.resize(static_cast<size_t>(p_.beam_width));
  for (Slot& s : slots_) s.hyp.score = kNone;
  set_pending();
}

void BeamSearch::set_pending() {
  pending_.clear();
  if (done_) return;
  for (const Running& r : running_) {
    std::vector<int32_t> s = prompt_;
    s.insert(s.end(), r.tokens.begin(), r.tokens.end());
    pending_.push_back(std::move(s));
  }
}

void BeamSearch::advance(const std::vector<std::vector<std::pair<int32_t, float>>>& lists) {
  if (done_ || lists.size() != running_.size())
    throw std::invalid_argument("beam search: one candidate list per pending sequence expected");
  const int W = p_.beam_width, K = k_;
  const auto is_eos = [&](int32_t t) {
    return std::find(p_.eos_token_ids.begin(), p_.eos_token_ids.end(), t) != p_.eos_token_ids.end();
  };
  std::vector<Candidate> cands;
  for (size_t b = 0; b < running_.size(); ++b)
    for (size_t j = 0; j < lists[b].size() && j < static_cast<size_t>(K); ++j)
      cands.push_back({static_cast<int>(b), lists[b][j].first, lists[b][j].second,
                       lists[b][j].second + running_[b].score, static_cast<int>(b * K + j)});
  const size_t keep = std::min(cands.size(), static_cast<size_t>(K));
  std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(),
                    [](const Candidate& a, const Candidate& b) {
                      return a.acc != b.acc ? a.acc > b.acc : a.order < b.order;
                    });
  cands.resize(keep);
  const bool at_max = cur_ + 1 >= p_.max_tokens;
  std::vector<char> hits(cands.size());
  bool all_hit = true;
  for (size_t i = 0; i < cands.size(); ++i) {
    hits[i] = at_max || is_eos(cands[i].token);
    all_hit = all_hit && hits[i];
  }
  // Finished hypotheses: the first W continuations that ended a beam, as
  // long as the slots are not closed (early_stopping true and all full, or
  // the heuristic said no improvement is possible).
  const auto all_finished = [&] {
    return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.finished; });
  };
  const bool closed =
      (all_finished() && p_.early_stopping == EarlyStopping::kTrue) || !heuristic_unsatisfied_;
  std::vector<Slot> merged = slots_;
  for (size_t i = 0; i < cands.size() && i < static_cast<size_t>(W); ++i) {
    if (!hits[i] || closed) continue;
    Slot s;
    s.finished = true;
    s.hyp.token_ids = running_[static_cast<size_t>(cands[i].beam)].tokens;
    s.hyp.token_ids.push_back(cands[i].token);
    s.hyp.cumulative_logprob = running_[static_cast<size_t>(cands[i].beam)].cum + cands[i].logprob;
    s.hyp.score = cands[i].acc / length_norm(cur_ + 1, p_.length_penalty);
    merged.push_back(std::move(s));
  }
  // HF keeps the best W of the slots' scores, an empty slot at -1e9; a
  // hypothesis scoring below that (a long one under a negative
  // length_penalty: cumulative_logprob x length^3 is often < -1e9) would lose
  // to an empty slot and never be kept. A finished hypothesis always comes
  // before an empty slot (as the list of HF's earlier BeamHypotheses, which
  // had no placeholders); otherwise the order is HF's.
  std::stable_sort(merged.begin(), merged.end(), [](const Slot& a, const Slot& b) {
    if (a.finished != b.finished) return a.finished;
    return a.hyp.score > b.hyp.score;
  });
  merged.resize(static_cast<size_t>(W));
  slots_ = std::move(merged);
  // Running beams: the best W continuations that did not end (ended ones
  // at -1e9, as HF, so they only fill places nothing else can).
  std::vector<size_t> order(cands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto run_score = [&](size_t i) { return cands[i].acc + (hits[i] ? kNone : 0.0f); };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return run_score(a) > run_score(b); });
  std::vector<Running> next_running;
  for (size_t k = 0; k < order.size() && k < static_cast<size_t>(W); ++k) {
    const Candidate& c = cands[order[k]];
    Running r = running_[static_cast<size_t>(c.beam)];
    r.tokens.push_back(c.token);
    r.cum += c.logprob;
    r.score = run_score(order[k]);
    next_running.push_back(std::move(r));
  }
  running_ = std::move(next_running);
  ++cur_;
  // Can the best running beam still beat the worst kept hypothesis?
  const int64_t best_len =
      p_.early_stopping == EarlyStopping::kNever && p_.length_penalty > 0.0f ? p_.max_tokens : cur_;
  const float best_possible =
      running_.empty() ? kNone : running_[0].score / length_norm(best_len, p_.length_penalty);
  float worst = slots_[0].hyp.score;
  for (const Slot& s : slots_) worst = std::min(worst, s.hyp.score);
  heuristic_unsatisfied_ = heuristic_unsatisfied_ && (!all_finished() || best_possible > worst);
  const bool open = !(all_finished() && p_.early_stopping == EarlyStopping::kTrue);
  done_ = !(heuristic_unsatisfied_ && open && !all_hit) || running_.empty();
  set_pending();
}

std::vector<BeamHypothesis> BeamSearch::result() const {
  std::vector<BeamHypothesis> out;
  for (const Slot& s : slots_)
    if (s.finished) out.push_back(s.hyp);
  return out;
}

std::vector<BeamHypothesis> beam_search(const std::vector<int32_t>& prompt,
                                        const BeamSearchParams& p, const NextTokenLogprobs& next) {
  BeamSearch bs(prompt, p);
  while (!bs.done()) {
    const auto lists = next(bs.pending(), bs.k());
    if (lists.size() != bs.pending().size())
      throw std::runtime_error("beam search: one candidate list per beam expected");
    bs.advance(lists);
  }
  return bs.result();
}

NextTokenLogprobs engine_next_token_logprobs(Engine& engine, std::string id_prefix,
                                             bool step_engine) {
  auto step = std::make_shared<int64_t>(0);
  return [&engine, id_prefix = std::move(id_prefix), step_engine, step](
             const std::vector<std::vector<int32_t>>& seqs, int k) {
    std::vector<std::shared_ptr<OutputChannel>> chans;
    for (size_t i = 0; i < seqs.size(); ++i) {
      auto req = std::make_unique<GenerateRequest>();
      req->request_id = id_prefix + "-" + std::to_string(*step) + "-" + std::to_string(i);
      req->prompt_token_ids = seqs[i];
      req->sampling.temperature = 0.0f;
      req->sampling.ignore_eos = true;
      req->sampling.max_tokens = 1;
      req->sampling.logprobs = k;
      req->output = std::make_shared<OutputChannel>();
      chans.push_back(req->output);
      engine.add_request(std::move(req));
    }
    ++*step;
    if (step_engine)
      while (engine.step()) {
      }
    std::vector<std::vector<std::pair<int32_t, float>>> out;
    for (auto& ch : chans) {
      const RequestOutput o = collect(*ch);
      if (!o.error.empty()) throw std::runtime_error("beam search: " + o.error);
      if (o.logprobs.empty()) throw std::runtime_error("beam search: a step returned no logprobs");
      out.push_back(o.logprobs[0].top);
    }
    return out;
  };
}

}  // namespace pagoda
