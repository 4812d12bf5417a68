// Beam search (engine/beam_search.h) against HF transformers' own beam
// search: tests/data/beam_search_reference.json (made on the device machine
// by tests/data/beam_search_reference.py; its "how" says how) holds, for
// stories260K and tiny-random-llama, 3 prompts × early_stopping true / false
// / "never" × length_penalty 1.0 / 0.5, num_beams 4, 12 new tokens, two eos
// ids: HF's 4 returned beams (tokens up to the first eos) and their
// sequences_scores. Ours, through the CPU engine (fp32): the same tokens, the
// same order, scores within 1e-4. Also: the beams share the prompt's blocks
// through the prefix cache (each step computes one token per beam), and the
// errors.
#include "engine/beam_search.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "tests/support/test_engine.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

nlohmann::json reference() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/beam_search_reference.json");
  if (!in) throw std::runtime_error("tests/data/beam_search_reference.json missing");
  return nlohmann::json::parse(in);
}

EarlyStopping early_stopping(const nlohmann::json& v) {
  if (v.is_string()) return EarlyStopping::kNever;
  return v.get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
}

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
  const nlohmann::json ref = reference();
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    if (c["model"] != name) continue;
    BeamSearchParams p;
    p.beam_width = c["num_beams"];
    p.max_tokens = c["max_new_tokens"];
    p.length_penalty = c["length_penalty"];
    p.early_stopping = early_stopping(c["early_stopping"]);
    p.eos_token_ids = c["eos_token_ids"].get<std::vector<int32_t>>();
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    SCOPED_TRACE(name + " prompt of " + std::to_string(prompt.size()) + " early_stopping " +
                 c["early_stopping"].dump() + " length_penalty " + c["length_penalty"].dump());
    const EngineStats before = engine->stats();
    const NextTokenLogprobs inner =
        engine_next_token_logprobs(*engine, "beam" + std::to_string(checked), true);
    int64_t requests = 0;
    const NextTokenLogprobs counted = [&](const std::vector<std::vector<int32_t>>& seqs, int k) {
      requests += static_cast<int64_t>(seqs.size());
      return inner(seqs, k);
    };
    const std::vector<BeamHypothesis> got = beam_search(prompt, p, counted);
    // Each request after the first continues its beam's previous one: the
    // full blocks and the copied partial block hold all but its new token.
    const EngineStats after = engine->stats();
    const int64_t computed =
        (after.prefix_cache_queries_total - before.prefix_cache_queries_total) -
        (after.prefix_cache_hits_total - before.prefix_cache_hits_total);
    EXPECT_LE(computed, static_cast<int64_t>(prompt.size()) - 1 + requests);
    const auto& want = c["beams"];
    ASSERT_EQ(got.size(), want.size());
    for (size_t b = 0; b < got.size(); ++b) {
      EXPECT_EQ(got[b].token_ids, want[b]["token_ids"].get<std::vector<int32_t>>()) << "beam " << b;
      EXPECT_NEAR(got[b].score, want[b]["score"].get<double>(), 1e-4) << "beam " << b;
      const double len = static_cast<double>(got[b].token_ids.size());
      EXPECT_NEAR(got[b].score, got[b].cumulative_logprob / std::pow(len, p.length_penalty), 1e-5);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 18);
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

// A fixed table instead of a model: token 1 ends beams (eos); early_stopping
// true stops as soon as beam_width hypotheses are kept.
TEST(BeamSearch, EarlyStoppingTrueStopsWhenTheSlotsAreFull) {
  int calls = 0;
  const NextTokenLogprobs next = [&](const std::vector<std::vector<int32_t>>& seqs, int k) {
    ++calls;
    std::vector<std::vector<std::pair<int32_t, float>>> out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      std::vector<std::pair<int32_t, float>> l{
          {1, -0.1f}, {2, -0.5f}, {3, -0.6f}, {4, -0.7f}, {5, -0.8f}};
      l.resize(std::min<size_t>(l.size(), static_cast<size_t>(k)));
      out.push_back(l);
    }
    return out;
  };
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
