// Beam search (engine/beam_search.h) against HF transformers' own beam
// search (tests/support/beam_reference.h) through the CPU engine (fp32): the
// same tokens, the same order, scores within 1e-4; the beams share the
// prompt's blocks through the prefix cache (each step computes one token per
// beam). Also the stopping rules on a fixed table, and the errors.
#include "engine/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/beam_reference.h"
#include "tests/support/test_engine.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

void check_model(const std::string& name, const std::string& dir) {
  ExecutorOptions o = test::stories_options();
  o.model_dir = dir;
  o.max_num_batched_tokens = 256;
  // tiny-random-llama has no tokenizer of its own: stories260K's (the same
  // 512-token vocabulary; beam search needs none, the engine one).
  EngineConfig cfg;
  cfg.max_model_len = o.max_model_len;
  cfg.max_num_seqs = o.max_num_seqs;
  cfg.max_num_batched_tokens = o.max_num_batched_tokens;
  cfg.log_stats = false;
  auto engine = std::make_unique<Engine>(cfg, make_model_executor(ModelConfig::from_dir(dir), o),
                                         load_tokenizer(test::stories_dir()));
  EXPECT_EQ(test::check_beam_reference(*engine, name, 1e-4), 18);
  // Every step after the first re-sent the prompt: its full blocks came
  // from the prefix cache.
  EXPECT_GT(engine->stats().prefix_cache_hits_total, 0);
}

TEST(BeamSearch, MatchesTransformersOnStories260K) {
  check_model("stories260K", test::stories_dir());
}

TEST(BeamSearch, MatchesTransformersOnTinyRandomLlama) {
  const std::string dir = test::shared_model("tiny-random-llama");
  if (!std::ifstream(dir + "/config.json"))
    GTEST_SKIP() << dir << " not found (../shared test assets)";
  check_model("tiny-random-llama", dir);
}

// A fixed table instead of a model: every running beam gets the first k of
// `table` as its next-token logprobs; each call (one engine step) counted in
// *calls when given.
NextTokenLogprobs same_for_every_beam(std::vector<std::pair<int32_t, float>> table,
                                      int* calls = nullptr) {
  return [table, calls](const std::vector<std::vector<int32_t>>& seqs, int k) {
    if (calls) ++*calls;
    std::vector<std::pair<int32_t, float>> l = table;
    l.resize(std::min<size_t>(l.size(), static_cast<size_t>(k)));
    return std::vector<std::vector<std::pair<int32_t, float>>>(seqs.size(), l);
  };
}

// Token 1 ends beams (eos); early_stopping true stops as soon as beam_width
// hypotheses are kept.
TEST(BeamSearch, EarlyStoppingTrueStopsWhenTheSlotsAreFull) {
  int calls = 0;
  const NextTokenLogprobs next =
      same_for_every_beam({{1, -0.1f}, {2, -0.5f}, {3, -0.6f}, {4, -0.7f}, {5, -0.8f}}, &calls);
  BeamSearchParams p;
  p.beam_width = 2;
  p.max_tokens = 50;
  p.early_stopping = EarlyStopping::kTrue;
  p.eos_token_ids = {1};
  const auto got = beam_search({7}, p, next);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].token_ids, std::vector<int32_t>{1});
  EXPECT_FLOAT_EQ(got[0].score, -0.1f);
  EXPECT_EQ(got[1].token_ids, (std::vector<int32_t>{2, 1}));
  EXPECT_FLOAT_EQ(got[1].score, -0.6f / 2);
  EXPECT_EQ(calls, 2);
}

// A strongly negative length_penalty multiplies the cumulative logprob by
// length^3: 300 tokens of logprob -2 score -600 x 300^3 = -1.6e10, below the
// -1e9 of an empty hypothesis slot. The finished beams are still the ones
// kept and returned (the best first), never an empty slot.
TEST(BeamSearch, NegativeLengthPenaltyKeepsTheFinishedBeams) {
  const NextTokenLogprobs next =
      same_for_every_beam({{5, -2.0f}, {6, -2.5f}, {7, -3.0f}, {8, -3.5f}});
  BeamSearchParams p;
  p.beam_width = 2;
  p.max_tokens = 300;
  p.length_penalty = -3.0f;
  p.eos_token_ids = {1};
  const auto got = beam_search({7}, p, next);
  ASSERT_EQ(got.size(), 2u);
  std::vector<int32_t> best(300, 5), second(300, 5);
  second.back() = 6;
  EXPECT_EQ(got[0].token_ids, best);
  EXPECT_EQ(got[1].token_ids, second);
  EXPECT_FLOAT_EQ(got[0].cumulative_logprob, -600.0f);
  EXPECT_FLOAT_EQ(got[1].cumulative_logprob, -600.5f);
  const auto norm = static_cast<float>(std::pow(300.0, -3.0));
  EXPECT_FLOAT_EQ(got[0].score, -600.0f / norm);
  EXPECT_FLOAT_EQ(got[1].score, -600.5f / norm);
  EXPECT_LT(got[0].score, -1.0e9f);
}

TEST(BeamSearch, RefusesBadParams) {
  const NextTokenLogprobs none = [](const std::vector<std::vector<int32_t>>& s, int) {
    return std::vector<std::vector<std::pair<int32_t, float>>>(s.size());
  };
  BeamSearchParams p;
  p.beam_width = 0;
  EXPECT_THROW(beam_search({1}, p, none), std::invalid_argument);
  p.beam_width = 2;
  p.max_tokens = 0;
  EXPECT_THROW(beam_search({1}, p, none), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda
