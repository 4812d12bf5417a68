// --long-prefill-token-threshold (vLLM v1's long_prefill_token_threshold):
// a prompt longer than the threshold is prefilled in chunks of that many
// tokens, a decode batched with it still gets its token every step, and
// every request finishes under the cap (the FakeExecutor checks every KV
// read against the tokens written, so a chunk boundary that skipped or
// repeated tokens would throw).
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
  explicit Rig(int64_t threshold) : SchedulerRig(config(threshold), kVocab, kBlocks, kBlock) {}
  static SchedulerConfig config(int64_t threshold) {
    SchedulerConfig c;
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

}  // namespace
}  // namespace pagoda
