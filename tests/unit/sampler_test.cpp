#include "engine/sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pagoda {
namespace {

// Frequencies of `draws` samples (each from a fresh copy of `logits`).
std::vector<double> frequencies(const std::vector<float>& logits, const SamplingParams& sp, int draws,
                                uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    SampleInput in{&sp, {}, {}, {}, &rng};
    f[static_cast<size_t>(Sampler::sample(l, in))] += 1.0 / draws;
  }
  return f;
}

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowestId) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Sampler::sample(l, {&sp}), 1);
  std::vector<float> l2 = {-3.0f, -1.0f, -2.0f};
  EXPECT_EQ(Sampler::sample(l2, {&sp}), 1);
}

TEST(Sampler, TemperatureOneFollowsTheSoftmax) {
  // softmax([1, 2, 3]) = [0.0900, 0.2447, 0.6652].
  SamplingParams sp;
  auto f = frequencies({1.0f, 2.0f, 3.0f}, sp, 20000);
  EXPECT_NEAR(f[0], 0.0900, 0.01);
  EXPECT_NEAR(f[1], 0.2447, 0.015);
  EXPECT_NEAR(f[2], 0.6652, 0.015);
}

TEST(Sampler, TemperatureScalesLogits) {
  // T = 2: softmax([0.5, 1, 1.5]) = [0.1863, 0.3072, 0.5065].
  SamplingParams sp;
  sp.temperature = 2.0f;
  auto f = frequencies({1.0f, 2.0f, 3.0f}, sp, 20000);
  EXPECT_NEAR(f[0], 0.1863, 0.015);
  EXPECT_NEAR(f[1], 0.3072, 0.015);
  EXPECT_NEAR(f[2], 0.5065, 0.015);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  // top_k = 2 on [1, 2, 3, 0]: e^2 / (e^2 + e^3) = 0.2689, 0.7311.
  SamplingParams sp;
  sp.top_k = 2;
  auto f = frequencies({1.0f, 2.0f, 3.0f, 0.0f}, sp, 20000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[3], 0.0);
  EXPECT_NEAR(f[1], 0.2689, 0.015);
  EXPECT_NEAR(f[2], 0.7311, 0.015);
}

TEST(Sampler, TopPKeepsTheSmallestNucleusReachingP) {
  // p = [0.1, 0.2, 0.3, 0.4], top_p = 0.65: 0.4 (mass before 0 < 0.65) and
  // 0.3 (mass before 0.4 < 0.65) stay; 0.2 (mass before 0.7) goes.
  // Renormalised: 0.3/0.7 = 0.4286, 0.4/0.7 = 0.5714.
  SamplingParams sp;
  sp.top_p = 0.65f;
  auto f = frequencies(log_probs({0.1, 0.2, 0.3, 0.4}), sp, 20000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[1], 0.0);
  EXPECT_NEAR(f[2], 0.4286, 0.015);
  EXPECT_NEAR(f[3], 0.5714, 0.015);
}

TEST(Sampler, MinPDropsTokensBelowMinPTimesTheTopProbability) {
  // min_p = 0.6 → threshold 0.24: 0.3 and 0.4 stay (0.4286, 0.5714).
  SamplingParams sp;
  sp.min_p = 0.6f;
  auto f = frequencies(log_probs({0.1, 0.2, 0.3, 0.4}), sp, 20000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[1], 0.0);
  EXPECT_NEAR(f[2], 0.4286, 0.015);
  EXPECT_NEAR(f[3], 0.5714, 0.015);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams sp;
  sp.repetition_penalty = 2.0f;
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 3.0f};
  std::vector<int32_t> prompt = {0}, output = {1};
  Sampler::apply_penalties(l, {&sp, prompt, output});
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], -4.0f);
  EXPECT_FLOAT_EQ(l[2], 1.0f);
  EXPECT_FLOAT_EQ(l[3], 3.0f);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputTokensOnly) {
  SamplingParams sp;
  sp.frequency_penalty = 0.5f;
  sp.presence_penalty = 1.0f;
  std::vector<float> l = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> prompt = {1, 1}, output = {2, 2, 0};
  Sampler::apply_penalties(l, {&sp, prompt, output});
  EXPECT_FLOAT_EQ(l[0], -1.5f);  // 0.5 * 1 + 1
  EXPECT_FLOAT_EQ(l[1], 0.0f);   // prompt only: untouched
  EXPECT_FLOAT_EQ(l[2], -2.0f);  // 0.5 * 2 + 1
}

TEST(Sampler, PenaltiesApplyBeforeGreedy) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.presence_penalty = 2.0f;
  std::vector<float> l = {1.0f, 0.0f};
  std::vector<int32_t> out = {0};
  EXPECT_EQ(Sampler::sample(l, {&sp, {}, out}), 1);
}

TEST(Sampler, SuppressedIdsAreNeverSampled) {
  SamplingParams sp;
  std::vector<int32_t> ban = {2};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = {0.0f, 0.0f, 5.0f};
    EXPECT_NE(Sampler::sample(l, {&sp, {}, {}, ban, &rng}), 2);
  }
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  SamplingParams sp;
  std::vector<float> base(16, 0.0f);
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> got;
    for (int i = 0; i < 32; ++i) {
      std::vector<float> l = base;
      got.push_back(Sampler::sample(l, {&sp, {}, {}, {}, &rng}));
    }
    return got;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, RejectsEmptyRowsAndMissingRng) {
  SamplingParams sp;
  std::vector<float> empty;
  EXPECT_THROW(Sampler::sample(empty, {&sp}), std::invalid_argument);
  std::vector<float> l = {1.0f, 2.0f};
  EXPECT_THROW(Sampler::sample(l, {&sp}), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda
