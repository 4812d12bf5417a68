// Each sampling transform on small logit vectors against values computed by
// hand (the formulas in sampler.h: vLLM v1 / OpenAI definitions), through
// Sampler::probabilities (the exact distribution the draw uses) and
// Sampler::sample_with_logprobs (raw logprobs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/sample/bad_words.h"
#include "engine/sample/sampler.h"

namespace pagoda {
namespace {

std::vector<float> logs(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

void expect_probs(std::vector<double> got, std::vector<double> want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

TEST(SamplerTransforms, LogitBiasIsAddedToTheLogits) {
  SamplingParams sp;
  sp.logit_bias = {{0, 2.0f}, {3, -100.0f}};
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 9.0f};
  Sampler::apply_penalties(l, {&sp});
  EXPECT_FLOAT_EQ(l[0], 3.0f);
  EXPECT_FLOAT_EQ(l[3], -91.0f);
  // softmax([3, 2, 3, -91]) = [e^3, e^2, e^3, ~0] / (2e^3 + e^2).
  std::vector<float> l2 = {1.0f, 2.0f, 3.0f, 9.0f};
  expect_probs(Sampler::probabilities(l2, {&sp}), {0.4223188, 0.1553624, 0.4223188, 0.0});
  // Greedy: the bias makes 0 tie with 2; ties go to the lowest id.
  sp.temperature = 0.0f;
  std::vector<float> l3 = {1.0f, 2.0f, 3.0f, 9.0f};
  EXPECT_EQ(Sampler::sample(l3, {&sp}), 0);
}

TEST(SamplerTransforms, RepetitionFrequencyAndPresencePenaltiesTogether) {
  // vLLM: repetition over prompt + output (divide positive, multiply
  // non-positive), then frequency x count and presence over output only.
  SamplingParams sp;
  sp.repetition_penalty = 2.0f;
  sp.frequency_penalty = 0.5f;
  sp.presence_penalty = 0.25f;
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 1.0f, 0.0f};
  std::vector<int32_t> prompt = {0, 4}, output = {1, 3, 3};
  Sampler::apply_penalties(l, {&sp, prompt, output});
  EXPECT_FLOAT_EQ(l[0], 1.0f);    // prompt only: 2 / 2
  EXPECT_FLOAT_EQ(l[1], -2.75f);  // -1 * 2 - 0.5 * 1 - 0.25
  EXPECT_FLOAT_EQ(l[2], 0.5f);    // unseen
  EXPECT_FLOAT_EQ(l[3], -0.75f);  // 1 / 2 - 0.5 * 2 - 0.25
  EXPECT_FLOAT_EQ(l[4], 0.0f);    // 0 * 2
}

TEST(SamplerTransforms, NegativePenaltiesEncourageRepeats) {
  SamplingParams sp;
  sp.frequency_penalty = -1.0f;
  sp.presence_penalty = -0.5f;
  std::vector<float> l = {0.0f, 0.0f};
  std::vector<int32_t> output = {1, 1};
  Sampler::apply_penalties(l, {&sp, {}, output});
  EXPECT_FLOAT_EQ(l[0], 0.0f);
  EXPECT_FLOAT_EQ(l[1], 2.5f);
}

TEST(SamplerTransforms, MinPAfterTemperature) {
  // logits [0, 2 ln 2, 4 ln 2] at T = 2 → p ∝ [1, 2, 4] = [1/7, 2/7, 4/7];
  // min_p 0.3 → threshold 0.3 x 4/7 = 0.171: 1/7 goes → [0, 1/3, 2/3].
  SamplingParams sp;
  sp.temperature = 2.0f;
  sp.min_p = 0.3f;
  const float ln2 = std::log(2.0f);
  std::vector<float> l = {0.0f, 2 * ln2, 4 * ln2};
  expect_probs(Sampler::probabilities(l, {&sp}), {0.0, 1.0 / 3, 2.0 / 3});
}

TEST(SamplerTransforms, TopKThenTopPTogether) {
  // p = [0.05, 0.1, 0.15, 0.3, 0.4]; top_k 3 keeps 0.15, 0.3, 0.4 (mass
  // 0.85; renormalised 0.176, 0.353, 0.471); top_p 0.8: the mass before 0.15
  // is 0.824 >= 0.8, so it goes → [0, 0, 0, 0.3/0.7, 0.4/0.7].
  SamplingParams sp;
  sp.top_k = 3;
  sp.top_p = 0.8f;
  std::vector<float> l = logs({0.05, 0.1, 0.15, 0.3, 0.4});
  expect_probs(Sampler::probabilities(l, {&sp}), {0, 0, 0, 3.0 / 7, 4.0 / 7});
  // top_p alone keeps 0.4, 0.3, 0.15 (mass before 0.15 is 0.7 < 0.8).
  sp.top_k = 0;
  std::vector<float> l2 = logs({0.05, 0.1, 0.15, 0.3, 0.4});
  expect_probs(Sampler::probabilities(l2, {&sp}), {0, 0, 0.15 / 0.85, 0.3 / 0.85, 0.4 / 0.85});
}

TEST(SamplerTransforms, MinTokensSuppressionRemovesEosFromTheDistribution) {
  SamplingParams sp;
  std::vector<int32_t> eos = {2};
  std::vector<float> l = {0.0f, 0.0f, 5.0f};
  expect_probs(Sampler::probabilities(l, {&sp, {}, {}, eos}), {0.5, 0.5, 0.0});
  sp.temperature = 0.0f;
  std::vector<float> l2 = {0.0f, 1.0f, 5.0f};
  EXPECT_EQ(Sampler::sample(l2, {&sp, {}, {}, eos}), 1);
}

TEST(SamplerTransforms, LogprobsAreTheRawLogSoftmaxWithTopK) {
  // log_softmax([1, 2, 3, 0.5]) = [-2.4607735, -1.4607735, -0.4607735,
  // -2.9607735] (lse = 3.4607735).
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.logprobs = 2;
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 0.5f};
  TokenLogprob t = Sampler::sample_with_logprobs(l, {&sp});
  EXPECT_EQ(t.token_id, 2);
  EXPECT_NEAR(t.logprob, -0.4607735, 1e-6);
  EXPECT_EQ(t.rank, 1);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].first, 2);
  EXPECT_NEAR(t.top[0].second, -0.4607735, 1e-6);
  EXPECT_EQ(t.top[1].first, 1);
  EXPECT_NEAR(t.top[1].second, -1.4607735, 1e-6);
}

TEST(SamplerTransforms, LogprobsIgnoreTemperaturePenaltiesAndBias) {
  // The bias and penalty make token 3 the greedy pick; its reported logprob
  // is still the raw one, and the top list is the raw ranking.
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.logprobs = 1;
  sp.logit_bias = {{3, 10.0f}};
  sp.repetition_penalty = 1.5f;
  std::vector<int32_t> prompt = {2};
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 0.5f};
  TokenLogprob t = Sampler::sample_with_logprobs(l, {&sp, prompt});
  EXPECT_EQ(t.token_id, 3);
  EXPECT_NEAR(t.logprob, -2.9607735, 1e-6);
  EXPECT_EQ(t.rank, 4);  // outside the top 1: its rank all the same (vLLM)
  ASSERT_EQ(t.top.size(), 1u);
  EXPECT_EQ(t.top[0].first, 2);
  EXPECT_NEAR(t.top[0].second, -0.4607735, 1e-6);

  // Random sampling at T = 0.5: whatever is drawn carries its raw logprob.
  SamplingParams hot;
  hot.temperature = 0.5f;
  hot.logprobs = 0;
  const double want[] = {-2.4607735, -1.4607735, -0.4607735, -2.9607735};
  const int64_t want_rank[] = {3, 2, 1, 4};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> r = {1.0f, 2.0f, 3.0f, 0.5f};
    TokenLogprob s = Sampler::sample_with_logprobs(r, {&hot, {}, {}, {}, &rng});
    EXPECT_NEAR(s.logprob, want[s.token_id], 1e-6);
    EXPECT_EQ(s.rank, want_rank[s.token_id]);
    EXPECT_TRUE(s.top.empty());
  }
}

TEST(SamplerTransforms, TopLogprobsAreCappedAndTiesGoToTheLowerId) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.logprobs = 1000;
  std::vector<float> l(40, 0.0f);  // uniform: log(1/40) each
  TokenLogprob t = Sampler::sample_with_logprobs(l, {&sp});
  ASSERT_EQ(t.top.size(), static_cast<size_t>(kMaxLogprobs));
  EXPECT_EQ(t.rank, 40);  // ties count: ids whose logprob is >= its own (vLLM)
  for (int i = 0; i < kMaxLogprobs; ++i) {
    EXPECT_EQ(t.top[static_cast<size_t>(i)].first, i);
    EXPECT_NEAR(t.top[static_cast<size_t>(i)].second, -std::log(40.0), 1e-6);
  }
}

TEST(SamplerTransforms, NoLogprobWorkUnlessAskedOrRankingBestOf) {
  SamplingParams sp;
  EXPECT_FALSE(Sampler::wants_logprob(sp));
  sp.best_of = 1;
  EXPECT_FALSE(Sampler::wants_logprob(sp));
  sp.best_of = 3;
  EXPECT_TRUE(Sampler::wants_logprob(sp));
  SamplingParams lp;
  lp.logprobs = 0;
  EXPECT_TRUE(Sampler::wants_logprob(lp));
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<float> l = {1.0f, 2.0f};
  TokenLogprob t = Sampler::sample_with_logprobs(l, {&greedy});
  EXPECT_EQ(t.token_id, 1);
  EXPECT_EQ(t.logprob, 0.0f);
}

TEST(SamplerTransforms, SampleDrawsFromTheReportedDistribution) {
  // The empirical frequencies of sample() follow probabilities() (top_k +
  // top_p + min_p + temperature together).
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 4;
  sp.top_p = 0.9f;
  sp.min_p = 0.05f;
  const std::vector<float> base = {0.3f, 1.2f, -0.4f, 2.0f, 0.9f, 1.5f};
  std::vector<float> l = base;
  const std::vector<double> p = Sampler::probabilities(l, {&sp});
  std::mt19937_64 rng(11);
  std::vector<double> f(base.size(), 0.0);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> r = base;
    f[static_cast<size_t>(Sampler::sample(r, {&sp, {}, {}, {}, &rng}))] += 1.0 / draws;
  }
  for (size_t i = 0; i < base.size(); ++i) {
    if (p[i] == 0.0) EXPECT_EQ(f[i], 0.0) << i;
    else EXPECT_NEAR(f[i], p[i], 0.015) << i;
  }
}

// Large vocabularies (where top_p sorts only the head, in rounds of 256,
// 512, ...): the kept set equals a full stable sort's, ties included.
TEST(SamplerTransforms, TopPOnALargeVocabularyKeepsWhatAFullSortKeeps) {
  std::mt19937_64 gen(5);
  for (int shape = 0; shape < 3; ++shape) {
    const size_t vocab = 5000;
    std::vector<float> base(vocab);
    for (size_t i = 0; i < vocab; ++i) {
      const double u = Sampler::uniform(gen);
      // 0: flat with many exact ties; 1: peaked; 2: gently sloped.
      base[i] = shape == 0 ? static_cast<float>(static_cast<int>(u * 4)) * 0.01f
                : shape == 1 ? static_cast<float>(u * 12.0)
                             : static_cast<float>(u * 2.0);
    }
    for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
      SCOPED_TRACE(::testing::Message() << "shape " << shape << " top_p " << top_p);
      SamplingParams sp;
      sp.temperature = 1.0f;
      sp.top_p = top_p;
      std::vector<float> l = base;
      const std::vector<double> p = Sampler::probabilities(l, {&sp});
      // Reference: softmax, full stable sort (ties: lower id first), keep
      // while the mass before a token is below top_p.
      double mx = -1e300, sum = 0.0;
      for (float x : base) mx = std::max(mx, static_cast<double>(x));
      std::vector<double> q(vocab);
      for (size_t i = 0; i < vocab; ++i) sum += q[i] = std::exp(static_cast<double>(base[i]) - mx);
      for (double& x : q) x /= sum;
      std::vector<int32_t> order(vocab);
      for (size_t i = 0; i < vocab; ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
      std::vector<bool> keep(vocab, false);
      double cum = 0.0;
      size_t kept = 0;
      for (int32_t id : order) {
        if (cum >= top_p && kept > 0) break;
        keep[static_cast<size_t>(id)] = true;
        cum += q[static_cast<size_t>(id)];
        ++kept;
      }
      size_t ours = 0;
      for (size_t i = 0; i < vocab; ++i) {
        ASSERT_EQ(p[i] > 0.0, keep[i]) << "token " << i << " of " << kept << " kept";
        ours += p[i] > 0.0;
      }
      EXPECT_EQ(ours, kept);
      if (shape == 0 && top_p >= 0.5f) {
        EXPECT_GT(kept, 512u);  // the doubling rounds ran
      }
    }
  }
}

TEST(SamplerTransforms, AllowedTokenIdsLeaveOnlyThoseIds) {
  SamplingParams sp;
  sp.allowed_token_ids = {1, 3};
  sp.logit_bias = {{0, 50.0f}, {3, 1.0f}};  // a bias cannot bring back a masked id
  std::vector<float> l = {5.0f, 1.0f, 9.0f, 1.0f};
  // softmax over ids 1 and 3 of [1, 2].
  expect_probs(Sampler::probabilities(l, {&sp}), {0.0, 0.2689414, 0.0, 0.7310586});
  sp.temperature = 0.0f;
  std::vector<float> l2 = {5.0f, 1.0f, 9.0f, 1.0f};
  EXPECT_EQ(Sampler::sample(l2, {&sp}), 3);
}

// vLLM v1's bad words: a one-token word is always banned; a longer word bans
// its last token when the OUTPUT ends with its other tokens (the prompt does
// not count); words longer than output + 1 ban nothing.
TEST(SamplerTransforms, BadWordBansFollowTheOutputTail) {
  SamplingParams sp;
  sp.bad_words_token_ids = {{7}, {4, 5}, {1, 2, 3}, {}};
  std::vector<int32_t> bans;
  append_bad_word_bans(sp, {}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{7}));
  bans.clear();
  append_bad_word_bans(sp, std::vector<int32_t>{9, 4}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{7, 5}));
  bans.clear();
  append_bad_word_bans(sp, std::vector<int32_t>{1, 2}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{7, 3}));
  bans.clear();
  append_bad_word_bans(sp, std::vector<int32_t>{1, 2, 4, 0}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{7}));
  // With min_tokens pending, EOS (unless ignore_eos) and stop ids come first.
  sp.min_tokens = 5;
  sp.stop_token_ids = {11};
  bans.clear();
  append_sampling_bans(sp, std::vector<int32_t>{9, 4}, {2}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{2, 11, 7, 5}));
  sp.ignore_eos = true;
  bans.clear();
  append_sampling_bans(sp, std::vector<int32_t>{9, 4}, {2}, bans);
  EXPECT_EQ(bans, (std::vector<int32_t>{11, 7, 5}));
}

}  // namespace
}  // namespace pagoda
