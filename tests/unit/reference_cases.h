// The "cases" format of shared/models/quantized/*/reference.json and
// shared/models/arch/*/reference.json (HF transformers' last-position logits
// and greedy ids per prompt), checked on a CpuModel.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/model_test_helpers.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {

// For each case: last-position logits within `bound` relative L2, and the
// reference's greedy_len greedy ids decoded one token per step through the
// paged cache. Prints each prompt's error and the worst under `tag`; counts
// the cases into `cases`.
inline void check_reference_cases(CpuModel& m, const nlohmann::json& ref, const std::string& tag,
                                  double bound, size_t greedy_len, int& cases) {
  const auto V = static_cast<size_t>(m.config.vocab_size);
  double worst = 0;
  cases = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), V);
    ASSERT_EQ(greedy.size(), greedy_len);
    const auto max_blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, max_blocks));
    const double e = rel_l2(logits.data(), want);
    EXPECT_LT(e, bound) << tag << " prompt of " << ids.size() << " tokens";
    std::printf("[%s] prompt of %zu tokens: relative L2 %.3g\n", tag.c_str(), ids.size(), e);
    worst = std::max(worst, e);
    std::vector<int32_t> got;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const auto next = argmax_row(logits, 0, static_cast<int64_t>(V));
      got.push_back(next);
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(one_seq_batch({next}, pos, 0, max_blocks));
    }
    EXPECT_EQ(got, greedy) << tag << " prompt of " << c["prompt_ids"].size() << " tokens";
    ++cases;
  }
  std::printf("[%s] worst relative L2 error %.3g over %d prompts\n", tag.c_str(), worst, cases);
}

}  // namespace pagoda::test
