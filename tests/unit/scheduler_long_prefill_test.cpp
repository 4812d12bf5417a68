// --long-prefill-token-threshold (vLLM v1's long_prefill_token_threshold):
// a prompt longer than the threshold is prefilled in chunks of that many
// tokens, a decode batched with it still gets its token every step, and
// every request finishes under the cap (the FakeExecutor checks every KV
// read against the tokens written, so a chunk boundary that skipped or
// repeated tokens would throw). --max-prefill-tokens-with-decodes: the
// prompt tokens of a step that carries a decode, all requests together,
// are capped; a step without decodes is not.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/model_runner.h"
#include "engine/sched/scheduler.h"
#include "engine_test_fakes.h"
#include "scheduler_rig.h"

namespace pagoda {
namespace {

constexpr int64_t kVocab = 40, kBlock = 4, kBlocks = 64;

struct Rig : testing::SchedulerRig {
  explicit Rig(int64_t threshold, int64_t with_decodes = 0)
      : SchedulerRig(config(threshold, with_decodes), kVocab, kBlocks, kBlock) {}
  static SchedulerConfig config(int64_t threshold, int64_t with_decodes) {
    SchedulerConfig c;
    c.max_prefill_tokens_with_decodes = with_decodes;
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 64;
    c.max_model_len = kBlocks * kBlock;
    c.eos_token_ids = {2};
    c.long_prefill_token_threshold = threshold;
    return c;
  }
};

std::vector<int32_t> ids_of(OutputChannel& ch) {
  std::vector<int32_t> ids;
  for (const RequestOutput& d : ch.drain())
    ids.insert(ids.end(), d.token_ids.begin(), d.token_ids.end());
  return ids;
}

TEST(SchedulerLongPrefill, ALongPromptGoesInChunksOfTheThresholdBesideADecode) {
  Rig r(16);
  auto a = r.add("a", 6, 8);
  EXPECT_EQ(r.step_scheduled(),
            (std::vector<std::pair<std::string, int64_t>>{{"a", 6}}));  // under the threshold
  auto b = r.add("b", 40, 2);
  // b's 40 prompt tokens in chunks of 16, 16, 8; a decodes one token each step.
  EXPECT_EQ(r.step_scheduled(),
            (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 16}}));
  EXPECT_EQ(r.step_scheduled(),
            (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 16}}));
  EXPECT_EQ(r.step_scheduled(), (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 8}}));
  EXPECT_EQ(r.step_scheduled(), (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 1}}));
  while (r.sched.has_unfinished()) r.step();
  EXPECT_EQ(ids_of(*a).size(), 8u);
  EXPECT_EQ(ids_of(*b).size(), 2u);
}

TEST(SchedulerLongPrefill, OffByDefaultTheStepBudgetAloneCapsAPrefill) {
  Rig r(0);
  r.add("a", 6, 4);
  r.step();
  r.add("b", 100, 2);
  // 64 tokens a step: a's decode and 63 of b's prompt, then the other 37.
  EXPECT_EQ(r.step_scheduled(),
            (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 63}}));
  EXPECT_EQ(r.step_scheduled(),
            (std::vector<std::pair<std::string, int64_t>>{{"a", 1}, {"b", 37}}));
}

TEST(SchedulerLongPrefill, EveryRequestFinishesWithAndWithoutTheCap) {
  std::vector<std::vector<int32_t>> outs[2];
  for (int k = 0; k < 2; ++k) {
    Rig r(k == 0 ? 0 : 8);
    std::vector<std::shared_ptr<OutputChannel>> chans;
    for (int i = 0; i < 4; ++i) chans.push_back(r.add(fmt::format("r{}", i), 10 + 9 * i, 6));
    for (int s = 0; s < 200 && r.sched.has_unfinished(); ++s) r.step();
    ASSERT_FALSE(r.sched.has_unfinished());
    for (auto& c : chans) outs[k].push_back(ids_of(*c));
  }
  // The fake's sampled id depends on the step, not the context, so only the
  // counts compare; the KV reads were checked on every step.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(outs[0][static_cast<size_t>(i)].size(), 6u);
    EXPECT_EQ(outs[1][static_cast<size_t>(i)].size(), 6u);
  }
}

using Scheduled = std::vector<std::pair<std::string, int64_t>>;

TEST(SchedulerPrefillWithDecodes, APromptBesideADecodeGoesInChunksOfTheBound) {
  Rig r(0, 16);
  auto a = r.add("a", 30, 8);
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 30}}));  // nothing decodes: the whole prompt
  auto b = r.add("b", 40, 2);
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 16}}));
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 16}}));
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 8}}));
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 1}}));
  while (r.sched.has_unfinished()) r.step();
  EXPECT_EQ(ids_of(*a).size(), 8u);
  EXPECT_EQ(ids_of(*b).size(), 2u);
}

TEST(SchedulerPrefillWithDecodes, ThePromptsOfAStepShareTheBound) {
  Rig r(0, 16);
  r.add("a", 4, 8);
  r.step();
  r.add("b", 10, 3);
  r.add("c", 10, 3);
  // a decodes: b's 10 prompt tokens and 6 of c's, then c's other 4 beside
  // the decodes of a and b (b sampled its first token last step).
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 10}, {"c", 6}}));
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 1}, {"c", 4}}));
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 1}, {"c", 1}}));
}

TEST(SchedulerPrefillWithDecodes, WithoutDecodesOnlyTheStepBudgetCaps) {
  Rig r(0, 16);
  r.add("a", 40, 2);
  r.add("b", 30, 2);
  // Two prompts and no decode: the 64-token budget, not the bound.
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 40}, {"b", 24}}));
  // Now a decodes: b's last 6 prompt tokens fit the bound.
  EXPECT_EQ(r.step_scheduled(), (Scheduled{{"a", 1}, {"b", 6}}));
}

TEST(SchedulerPrefillWithDecodes, EveryRequestFinishesUnderTheBoundWithTheThreshold) {
  Rig r(8, 12);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  for (int i = 0; i < 4; ++i) chans.push_back(r.add(fmt::format("r{}", i), 10 + 9 * i, 6));
  int bounded = 0;
  for (int s = 0; s < 200 && r.sched.has_unfinished(); ++s) {
    const SchedulerOutput o = r.step();
    for (const auto& [id, n] : r.scheduled) EXPECT_LE(n, 8) << id;  // the per-request threshold
    if (o.num_decode_tokens > 0) {
      EXPECT_LE(o.num_prefill_tokens, 12) << "step " << s;
      bounded += o.num_prefill_tokens == 12;
    }
  }
  EXPECT_GT(bounded, 0) << "no step reached the bound: the test did not exercise it";
  ASSERT_FALSE(r.sched.has_unfinished());
  for (auto& c : chans) EXPECT_EQ(ids_of(*c).size(), 6u);
}

}  // namespace
}  // namespace pagoda
