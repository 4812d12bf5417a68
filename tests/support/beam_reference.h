// Beam search through an engine against HF transformers' own beams:
// tests/data/beam_search_reference.json (made on the device machine by
// tests/data/beam_search_reference.py; its "how" says how) holds, for
// stories260K and tiny-random-llama, 3 prompts × early_stopping true / false
// / "never" × length_penalty 1.0 / 0.5, num_beams 4, 12 new tokens, two eos
// ids: HF's 4 returned beams (tokens up to the first eos) and their
// sequences_scores. check_beam_reference runs every case of one model
// through `engine` (engine/beam_search.h's engine_next_token_logprobs, the
// engine stepped on this thread) and expects the same tokens in the same
// order and scores within `score_tol`. Also: each step after the first
// computes one token per beam (the full blocks and the copied partial block
// hold the rest). Header-only; used by the unit and GPU test binaries.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/beam_search.h"
#include "engine/engine.h"

namespace pagoda::test {

inline nlohmann::json beam_reference() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/beam_search_reference.json");
  if (!in) throw std::runtime_error("tests/data/beam_search_reference.json missing");
  return nlohmann::json::parse(in);
}

inline EarlyStopping beam_early_stopping(const nlohmann::json& v) {
  if (v.is_string()) return EarlyStopping::kNever;
  return v.get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
}

// Runs the reference's cases for model `name` on `engine`; returns how many
// ran (18 per model in the file).
inline int check_beam_reference(Engine& engine, const std::string& name, double score_tol) {
  const nlohmann::json ref = beam_reference();
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    if (c["model"].get<std::string>() != name) continue;
    BeamSearchParams p;
    p.beam_width = c["num_beams"];
    p.max_tokens = c["max_new_tokens"];
    p.length_penalty = c["length_penalty"];
    p.early_stopping = beam_early_stopping(c["early_stopping"]);
    p.eos_token_ids = c["eos_token_ids"].get<std::vector<int32_t>>();
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    SCOPED_TRACE(name + " prompt of " + std::to_string(prompt.size()) + " early_stopping " +
                 c["early_stopping"].dump() + " length_penalty " + c["length_penalty"].dump());
    const EngineStats before = engine.stats();
    const NextTokenLogprobs inner =
        engine_next_token_logprobs(engine, "beam" + std::to_string(checked), true);
    int64_t requests = 0;
    const NextTokenLogprobs counted = [&](const std::vector<std::vector<int32_t>>& seqs, int k) {
      requests += static_cast<int64_t>(seqs.size());
      return inner(seqs, k);
    };
    const std::vector<BeamHypothesis> got = beam_search(prompt, p, counted);
    const EngineStats after = engine.stats();
    const int64_t computed =
        (after.prefix_cache_queries_total - before.prefix_cache_queries_total) -
        (after.prefix_cache_hits_total - before.prefix_cache_hits_total);
    EXPECT_LE(computed, static_cast<int64_t>(prompt.size()) - 1 + requests);
    const auto& want = c["beams"];
    EXPECT_EQ(got.size(), want.size());
    for (size_t b = 0; b < got.size() && b < want.size(); ++b) {
      EXPECT_EQ(got[b].token_ids, want[b]["token_ids"].get<std::vector<int32_t>>()) << "beam " << b;
      EXPECT_NEAR(got[b].score, want[b]["score"].get<double>(), score_tol) << "beam " << b;
      const double len = static_cast<double>(got[b].token_ids.size());
      EXPECT_NEAR(got[b].score, got[b].cumulative_logprob / std::pow(len, p.length_penalty), 1e-5);
    }
    ++checked;
  }
  return checked;
}

}  // namespace pagoda::test
