#include "engine/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "engine/guided/guide.h"

namespace pagoda {
namespace {

// Step 5's filtered distribution (non-greedy), normalised to sum 1.
std::vector<double> filtered_probs(std::span<const float> logits, const SamplingParams& sp) {
  // Softmax of logits / temperature (in double for stable sums).
  const size_t vocab = logits.size();
  double max_l = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_l = std::max(max_l, static_cast<double>(l) / sp.temperature);
  std::vector<double> prob(vocab);
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    prob[i] = std::exp(static_cast<double>(logits[i]) / sp.temperature - max_l);
    sum += prob[i];
  }
  for (double& p : prob) p /= sum;

  // No full-vocabulary sort unless top-p needs one: min_p needs only the
  // maximum, top_k the k-th largest (nth_element, O(vocab)), and top_p an
  // order over the tokens min_p/top_k kept (ties: lower id first). Plain
  // temperature sampling sorts nothing (a 151,936-entry sort per token made
  // it 6x slower than greedy on the CPU backend).
  std::vector<bool> keep(vocab, true);
  if (sp.min_p > 0.0f) {
    const double top = *std::max_element(prob.begin(), prob.end());
    for (size_t i = 0; i < vocab; ++i)
      if (prob[i] < sp.min_p * top) keep[i] = false;
  }
  if (sp.top_k > 0 && static_cast<size_t>(sp.top_k) < vocab) {
    std::vector<double> sorted(prob);
    const auto kth_it = sorted.begin() + (sp.top_k - 1);
    std::nth_element(sorted.begin(), kth_it, sorted.end(), std::greater<double>());
    const double kth = *kth_it;
    for (size_t i = 0; i < vocab; ++i)
      if (prob[i] < kth) keep[i] = false;
  }
  if (sp.top_p < 1.0f) {
    // Renormalise over what min_p/top_k kept, then keep the head whose mass
    // before each token is still below top_p (the first token always stays).
    std::vector<int32_t> order;
    double kept_sum = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
      if (!keep[i]) continue;
      order.push_back(static_cast<int32_t>(i));
      kept_sum += prob[i];
    }
    // Most likely first, ties by lower id (a strict total order). Only the
    // head up to the cut is sorted: the top 256 (nth_element + sort), then
    // twice as many, until the cut falls inside (a peaked distribution
    // needs one round; a flat one ends as a full sort).
    auto before = [&](int32_t a, int32_t b) {
      const double pa = prob[static_cast<size_t>(a)], pb = prob[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    };
    const double target = sp.top_p * kept_sum;
    size_t cut = order.size();
    for (size_t k = std::min<size_t>(256, order.size());; k = std::min(2 * k, order.size())) {
      if (k < order.size()) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), before);
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), before);
      double cum = 0.0;
      size_t i = 0;
      for (; i < k && cum < target; ++i) cum += prob[static_cast<size_t>(order[i])];
      if (cum >= target || k == order.size()) {
        cut = i;  // tokens before i carried the mass below top_p; the first always stays
        break;
      }
    }
    for (size_t i = std::max<size_t>(cut, 1); i < order.size(); ++i) keep[static_cast<size_t>(order[i])] = false;
  }
  double total = 0.0;
  for (size_t i = 0; i < vocab; ++i) total += keep[i] ? prob[i] : 0.0;
  for (size_t i = 0; i < vocab; ++i) prob[i] = keep[i] ? prob[i] / total : 0.0;
  return prob;
}

void check_input(std::span<const float> logits, const SampleInput& in) {
  if (logits.empty()) throw std::invalid_argument("Sampler::sample: empty logits");
  if (!in.params) throw std::invalid_argument("Sampler::sample: no SamplingParams");
}

}  // namespace

double Sampler::uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int32_t Sampler::argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("Sampler::argmax: empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

bool Sampler::wants_logprob(const SamplingParams& sp) {
  return sp.logprobs.has_value() || sp.best_of.value_or(sp.n) > sp.n;
}

std::vector<double> Sampler::log_softmax(std::span<const float> logits) {
  double max_l = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_l = std::max(max_l, static_cast<double>(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_l);
  const double lse = max_l + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lse;
  return out;
}

void Sampler::apply_penalties(std::span<float> logits, const SampleInput& in) {
  const SamplingParams& sp = *in.params;
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto valid = [&](int32_t id) { return id >= 0 && id < vocab; };
  if (!sp.allowed_token_ids.empty()) {
    std::vector<bool> allowed(logits.size(), false);
    for (int32_t id : sp.allowed_token_ids)
      if (valid(id)) allowed[static_cast<size_t>(id)] = true;
    for (size_t i = 0; i < logits.size(); ++i)
      if (!allowed[i]) logits[i] = -std::numeric_limits<float>::infinity();
  }
  if (in.guided_mask) {
    const guided::TokenMask& m = *in.guided_mask;
    const bool eos_ok = in.guided_accepting || m.count == 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const auto id = static_cast<int32_t>(i);
      if (m.test(id)) continue;
      if (eos_ok && std::find(in.eos_ids.begin(), in.eos_ids.end(), id) != in.eos_ids.end())
        continue;
      logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  for (auto [id, bias] : sp.logit_bias)
    if (valid(id)) logits[static_cast<size_t>(id)] += bias;
  for (int32_t id : in.suppress_ids)
    if (valid(id)) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
  if (sp.repetition_penalty != 1.0f && sp.repetition_penalty > 0.0f) {
    std::vector<bool> seen(logits.size(), false);
    for (int32_t id : in.prompt_ids) if (valid(id)) seen[static_cast<size_t>(id)] = true;
    for (int32_t id : in.output_ids) if (valid(id)) seen[static_cast<size_t>(id)] = true;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!seen[i]) continue;
      logits[i] = logits[i] > 0 ? logits[i] / sp.repetition_penalty : logits[i] * sp.repetition_penalty;
    }
  }
  if (sp.frequency_penalty != 0.0f || sp.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t id : in.output_ids) if (valid(id)) counts[id]++;
    for (auto [id, c] : counts)
      logits[static_cast<size_t>(id)] -= sp.frequency_penalty * static_cast<float>(c) + sp.presence_penalty;
  }
}

std::vector<double> Sampler::probabilities(std::span<float> logits, const SampleInput& in) {
  check_input(logits, in);
  apply_penalties(logits, in);
  if (in.params->greedy()) {
    std::vector<double> p(logits.size(), 0.0);
    p[static_cast<size_t>(argmax(logits))] = 1.0;
    return p;
  }
  return filtered_probs(logits, *in.params);
}

int32_t Sampler::sample(std::span<float> logits, const SampleInput& in) {
  check_input(logits, in);
  const SamplingParams& sp = *in.params;
  apply_penalties(logits, in);
  if (in.guided_mask && !std::any_of(logits.begin(), logits.end(), [](float l) {
        return l > -std::numeric_limits<float>::infinity();
      }))
    return in.eos_ids.empty() ? 0 : in.eos_ids.front();  // nothing allowed: end the output
  if (sp.greedy()) return argmax(logits);
  if (!in.rng) throw std::invalid_argument("Sampler::sample: no rng for random sampling");
  const std::vector<double> prob = filtered_probs(logits, sp);
  const double r = uniform(*in.rng);
  double acc = 0.0;
  int32_t last_kept = -1;
  for (size_t i = 0; i < prob.size(); ++i) {
    if (prob[i] <= 0.0) continue;
    acc += prob[i];
    last_kept = static_cast<int32_t>(i);
    if (r < acc) return static_cast<int32_t>(i);
  }
  return last_kept;  // rounding at the very top of the CDF
}

TokenLogprob Sampler::sample_with_logprobs(std::span<float> logits, const SampleInput& in) {
  check_input(logits, in);
  TokenLogprob out;
  if (!wants_logprob(*in.params)) {
    out.token_id = sample(logits, in);
    return out;
  }
  // Raw log-softmax first: the steps below modify the row in place.
  const std::vector<double> lp = log_softmax(logits);
  const int k = std::clamp(in.params->logprobs.value_or(0), 0, kMaxLogprobs);
  if (k > 0) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t kk = std::min(static_cast<size_t>(k), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(),
                      [&](int32_t a, int32_t b) {
                        const double la = lp[static_cast<size_t>(a)], lb = lp[static_cast<size_t>(b)];
                        return la > lb || (la == lb && a < b);
                      });
    for (size_t i = 0; i < kk; ++i)
      out.top.emplace_back(ids[i], static_cast<float>(lp[static_cast<size_t>(ids[i])]));
  }
  out.token_id = sample(logits, in);
  const double own = lp[static_cast<size_t>(out.token_id)];
  out.logprob = static_cast<float>(own);
  if (in.params->logprobs)  // its rank, as vLLM reports it beside the top k
    out.rank = std::count_if(lp.begin(), lp.end(), [own](double x) { return x >= own; });
  return out;
}

}  // namespace pagoda
