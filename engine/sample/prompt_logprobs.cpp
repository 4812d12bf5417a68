// Prompt logprobs (engine/sample/prompt_logprobs.h).
#include "engine/sample/prompt_logprobs.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/sample/sampler.h"

namespace pagoda {

PromptLogprobRows prompt_logprob_rows(const ScheduledSeq& s) {
  const Sequence& seq = *s.seq;
  if (!seq.sampling.prompt_logprobs || seq.index != 0) return {};
  const int64_t begin =
      std::max(seq.num_computed_tokens, static_cast<int64_t>(seq.prompt_logprobs.size()));
  const int64_t end =
      std::min(seq.num_computed_tokens + s.num_new_tokens, seq.num_prompt_tokens - 1);
  if (end <= begin) return {};
  return {begin, end - begin};
}

void add_prompt_logprob_rows(const SchedulerOutput& out, ForwardBatch& b) {
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const PromptLogprobRows r = prompt_logprob_rows(out.seqs[i]);
    // Position q is at token row query_start_loc[i] + (q - num_computed_tokens).
    const int64_t base = b.query_start_loc.at(i) - out.seqs[i].seq->num_computed_tokens;
    for (int64_t q = r.first; q < r.first + r.count; ++q)
      b.logits_indices.push_back(static_cast<int32_t>(base + q));
  }
}

void record_prompt_logprobs(const SchedulerOutput& out, std::span<const float> logits,
                            int64_t vocab) {
  const auto V = static_cast<size_t>(vocab);
  size_t row = static_cast<size_t>(out.num_samples());
  for (const ScheduledSeq& s : out.seqs) {
    const PromptLogprobRows r = prompt_logprob_rows(s);
    if (r.count == 0) continue;
    Sequence& seq = *s.seq;
    if ((row + static_cast<size_t>(r.count)) * V > logits.size())
      throw std::logic_error(
          "record_prompt_logprobs: the step has fewer logits rows than asked for");
    const int k = std::clamp(*seq.sampling.prompt_logprobs, 0, kMaxLogprobs);
    for (int64_t q = r.first; q < r.first + r.count; ++q, ++row)
      seq.prompt_logprobs.push_back(score_prompt_token(
          logits.subspan(row * V, V), seq.token_ids.at(static_cast<size_t>(q + 1)), k));
  }
}

size_t append_prompt_score_rows(const SchedulerOutput& out, int32_t first_row,
                                DeviceSamplingBatch& b) {
  size_t added = 0;
  int32_t row = first_row;
  for (const ScheduledSeq& s : out.seqs) {
    const PromptLogprobRows r = prompt_logprob_rows(s);
    for (int64_t q = r.first; q < r.first + r.count; ++q, ++added) {
      DeviceSampleRow d;
      d.src_row = row++;
      d.score_token = s.seq->token_ids.at(static_cast<size_t>(q + 1));
      d.logprobs = std::clamp(*s.seq->sampling.prompt_logprobs, 0, kMaxLogprobs);
      b.rows.push_back(d);
    }
  }
  return added;
}

void record_prompt_scores(const SchedulerOutput& out, std::span<const TokenLogprob> scores) {
  size_t i = 0;
  for (const ScheduledSeq& s : out.seqs) {
    const PromptLogprobRows r = prompt_logprob_rows(s);
    if (r.count == 0) continue;
    if (i + static_cast<size_t>(r.count) > scores.size())
      throw std::logic_error("record_prompt_scores: fewer scores than prompt-logprob rows");
    for (int64_t q = 0; q < r.count; ++q, ++i) {
      const TokenLogprob& t = scores[i];
      s.seq->prompt_logprobs.push_back(PromptLogprob{t.token_id, t.logprob, t.rank, t.top});
    }
  }
  if (i != scores.size())
    throw std::logic_error("record_prompt_scores: more scores than prompt-logprob rows");
}

PromptLogprob score_prompt_token(std::span<const float> row, int32_t token, int k) {
  if (row.empty() || token < 0 || static_cast<size_t>(token) >= row.size())
    throw std::invalid_argument("score_prompt_token: token " + std::to_string(token) +
                                " outside the row");
  const std::vector<double> lp = Sampler::log_softmax(row);
  PromptLogprob out;
  out.token_id = token;
  const double own = lp[static_cast<size_t>(token)];
  out.logprob = static_cast<float>(own);
  out.rank = std::count_if(lp.begin(), lp.end(), [own](double v) { return v >= own; });
  const size_t kk = std::min(static_cast<size_t>(std::max(k, 0)), row.size());
  if (kk > 0) {
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(),
                      [&](int32_t a, int32_t b) {
                        const double la = lp[static_cast<size_t>(a)],
                                     lb = lp[static_cast<size_t>(b)];
                        return la > lb || (la == lb && a < b);
                      });
    for (size_t i = 0; i < kk; ++i)
      out.top.emplace_back(ids[i], static_cast<float>(lp[static_cast<size_t>(ids[i])]));
  }
  return out;
}

}  // namespace pagoda
