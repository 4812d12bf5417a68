// Token masks filled by the mask workers (engine/guided/mask_precompute.h):
// fill_masks (a step's missing masks, in parallel) and precompute_masks (a
// small DFA's states in the background) give, state for state, the masks
// Guide::mask computes lazily on one thread; a state that does not exist
// throws after the others are filled. append_guided_mask shares one copy
// of a mask between rows in the same state and EOS rule. Tokenizer:
// tiny-random-qwen2-chat's (Qwen2's 151k-token BPE).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/mask_precompute.h"
#include "engine/guided/regex_dfa.h"
#include "engine/guided/token_vocab.h"
#include "engine/sample/device_rows.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::guided {
namespace {

const char* kRegex = R"(\{"a": [0-9]{1,3}, "b": "[a-z]{0,6}"\})";

std::shared_ptr<const TokenVocab> qwen_vocab() {
  static const std::shared_ptr<const Tokenizer> tok =
      load_tokenizer(test::shared_model("tiny-random-qwen2-chat"));
  return TokenVocab::of(tok);
}

std::shared_ptr<const Guide> fresh_guide() {  // not compile_guide: no cache, no precompute
  return std::make_shared<const Guide>(ByteDfa::compile(kRegex), qwen_vocab(), kRegex);
}

TEST(GuidedMaskWorkers, FillMasksEqualsLazyMasksForEveryState) {
  const auto lazy = fresh_guide(), filled = fresh_guide();
  const auto n = static_cast<int32_t>(lazy->num_states());
  ASSERT_GT(n, 10);
  const MaskFillTotals before = mask_fill_totals();
  std::vector<std::pair<const Guide*, int32_t>> want;
  for (int32_t s = 0; s < n; ++s) want.emplace_back(filled.get(), s);
  want.emplace_back(filled.get(), 0);  // a duplicate costs nothing
  fill_masks(want);
  const MaskFillTotals after = mask_fill_totals();
  EXPECT_EQ(after.background_masks - before.background_masks, n);
  EXPECT_GT(after.wait_seconds, before.wait_seconds);
  for (int32_t s = 0; s < n; ++s) {
    ASSERT_TRUE(filled->has_mask(s)) << "state " << s;
    EXPECT_EQ(filled->mask(s).words, lazy->mask(s).words) << "state " << s;
    EXPECT_EQ(filled->mask(s).count, lazy->mask(s).count) << "state " << s;
  }
  EXPECT_EQ(mask_fill_totals().background_masks, after.background_masks);  // all cached: no refill
  fill_masks(want);
  EXPECT_EQ(mask_fill_totals().background_masks, after.background_masks);
}

TEST(GuidedMaskWorkers, AStateThatDoesNotExistThrowsAfterTheOthersAreFilled) {
  const auto g = fresh_guide();
  const auto n = static_cast<int32_t>(g->num_states());
  EXPECT_THROW(fill_masks({{g.get(), 1}, {g.get(), n + 5}, {g.get(), 2}}), std::out_of_range);
  EXPECT_TRUE(g->has_mask(1));
  EXPECT_TRUE(g->has_mask(2));
  EXPECT_FALSE(g->has_mask(n + 5));
}

TEST(GuidedMaskWorkers, PrecomputedMasksEqualLazyOnes) {
  const auto lazy = fresh_guide(), pre = fresh_guide();
  ASSERT_LE(pre->num_states(), kPrecomputeMaxStates);
  precompute_masks(pre);  // the workers race this thread below: either fill is the same
  for (int32_t s = 0; s < static_cast<int32_t>(lazy->num_states()); ++s)
    EXPECT_EQ(pre->mask(s).words, lazy->mask(s).words) << "state " << s;
}

// The finish check's question without the mask: on Qwen2's byte-level
// vocabulary (every byte is a token) can_continue decides from the DFA
// alone, and agrees with the mask in every state (the accepting end state
// of this regex allows nothing).
TEST(GuidedMaskWorkers, CanContinueAgreesWithTheMaskWithoutFillingIt) {
  const auto lazy = fresh_guide(), quick = fresh_guide();
  int ends = 0;
  for (int32_t s = 0; s < static_cast<int32_t>(lazy->num_states()); ++s) {
    EXPECT_EQ(quick->can_continue(s), lazy->mask(s).count > 0) << "state " << s;
    EXPECT_FALSE(quick->has_mask(s)) << "state " << s;
    ends += lazy->mask(s).count == 0 ? 1 : 0;
  }
  EXPECT_GE(ends, 1);
  EXPECT_FALSE(quick->can_continue(-1));
}

TEST(GuidedMaskWorkers, RowsInOneStateShareOneCopyOfTheMask) {
  const auto g = fresh_guide();
  const int64_t vocab = qwen_vocab()->size();
  const size_t words = static_cast<size_t>((vocab + 31) / 32);
  const std::vector<int32_t> eos = {static_cast<int32_t>(vocab - 1)};
  DeviceSamplingBatch b;
  SamplingParams sp;
  const int32_t s0 = g->start(), s1 = g->walk(g->start(), "{");
  ASSERT_GE(s1, 0);
  std::vector<int32_t> begins;
  for (const int32_t s : {s0, s1, s0, s1, s0}) {
    DeviceSampleRow& r = append_sample_row(b, sp, {}, eos, static_cast<int32_t>(b.rows.size()), 0);
    append_guided_mask(b, r, g->mask(s), g->accepting(s), eos, vocab);
    begins.push_back(r.mask_begin);
  }
  EXPECT_EQ(b.mask_words.size(), 2 * words);  // two states, two copies
  EXPECT_EQ(begins, (std::vector<int32_t>{0, static_cast<int32_t>(words), 0,
                                          static_cast<int32_t>(words), 0}));
  // The same mask with EOS added (accepting) is another copy.
  DeviceSampleRow& r = append_sample_row(b, sp, {}, eos, static_cast<int32_t>(b.rows.size()), 0);
  append_guided_mask(b, r, g->mask(s0), /*accepting=*/true, eos, vocab);
  EXPECT_EQ(r.mask_begin, static_cast<int32_t>(2 * words));
  EXPECT_EQ(b.mask_words.size(), 3 * words);
  b.clear();
  EXPECT_TRUE(b.mask_keys.empty());
}

}  // namespace
}  // namespace pagoda::guided
