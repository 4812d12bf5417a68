// Partial-block prefix caching through the Scheduler (BlockManager::
// acquire_cached_partial): a request that continues a finished one's
// tokens past its last full block computes only what follows the match,
// from a copy of that block made before the step (SchedulerOutput::
// block_copies). The FakeExecutor keeps each KV slot's token and context
// hash and checks every read, so a copy that went wrong, or none, throws;
// the invariants (pinned copy sources counted) are checked every step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler_rig.h"

namespace pagoda {
namespace {

constexpr int64_t kVocab = 40, kBlock = 4, kBlocks = 16;

SchedulerConfig config() {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = kBlocks * kBlock;
  c.eos_token_ids = {2};
  return c;
}

std::vector<int32_t> ids_of(OutputChannel& ch) {
  std::vector<int32_t> ids;
  for (const RequestOutput& d : ch.drain())
    ids.insert(ids.end(), d.token_ids.begin(), d.token_ids.end());
  return ids;
}

std::vector<int32_t> prompt_of(int n, int first) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(3 + (first + i * 5) % 30);
  return v;
}

TEST(SchedulerPartialCache, AContinuationComputesOnlyItsNewTokenFromACopy) {
  testing::SchedulerRig r(config(), kVocab, kBlocks, kBlock, 0, /*caching=*/true);
  // "a": 10 prompt tokens, one output token (computed: 10; blocks 0-1 full,
  // block 2 holds 2 computed tokens).
  const std::vector<int32_t> pa = prompt_of(10, 1);
  auto a = r.add_tokens("a", pa, 1);
  r.run_to_end();
  const std::vector<int32_t> out_a = ids_of(*a);
  ASSERT_EQ(out_a.size(), 1u);
  EXPECT_EQ(r.blocks.num_partial_blocks(), 1);

  // "b" = a's prompt + a's token (a beam search step's request): 8 tokens
  // from the full blocks, 2 from the copy, 1 to compute.
  std::vector<int32_t> pb = pa;
  pb.push_back(out_a[0]);
  auto b = r.add_tokens("b", pb, 3);
  const SchedulerOutput first = r.step();
  EXPECT_EQ(r.scheduled, (std::vector<std::pair<std::string, int64_t>>{{"b", 1}}));
  ASSERT_EQ(first.block_copies.size(), 1u);
  EXPECT_EQ(r.exec.blocks_copied(), 1);
  r.run_to_end();
  EXPECT_EQ(ids_of(*b).size(), 3u);
  EXPECT_EQ(r.sched.prefix_cache_hits(), 10);

  // Two continuations of the same block in one step each get a copy.
  // "c" (b's prompt again) and "d" (a's prompt again) both continue a's
  // partial block (b's own last blocks hold b's output).
  auto c = r.add_tokens("c", pb, 2);
  auto d = r.add_tokens("d", pa, 2);
  r.step();
  EXPECT_EQ(r.scheduled, (std::vector<std::pair<std::string, int64_t>>{{"c", 1}, {"d", 1}}));
  r.run_to_end();
  EXPECT_EQ(ids_of(*c).size(), 2u);
  EXPECT_EQ(ids_of(*d).size(), 2u);
  EXPECT_EQ(r.blocks.num_used(), 0);
}

TEST(SchedulerPartialCache, ChainsOfContinuationsInATightPoolReadTheirOwnTokens) {
  // Each request continues the previous one's prompt and output, beside
  // another request, in a pool they nearly fill (pinned copy sources take
  // room too); the FakeExecutor checks that every KV slot read holds the
  // token (and context) it must, so a copied block that went wrong throws.
  // Without caching: no copies. (Preemption with partial hits: the
  // scheduler simulation.)
  for (const bool caching : {false, true}) {
    testing::SchedulerRig r(config(), kVocab, 8, kBlock, 0, caching);
    std::vector<int32_t> ctx = prompt_of(5, 3);
    for (int k = 0; k < 6; ++k) {
      auto ch = r.add_tokens(fmt::format("q{}", k), ctx, 3);
      auto other = r.add_tokens(fmt::format("o{}", k), prompt_of(9, k), 4);
      r.run_to_end();
      const std::vector<int32_t> got = ids_of(*ch);
      ASSERT_EQ(got.size(), 3u);
      EXPECT_EQ(ids_of(*other).size(), 4u);
      ctx.insert(ctx.end(), got.begin(), got.end());
    }
    EXPECT_EQ(r.blocks.num_used(), 0);
    if (caching) {
      EXPECT_GT(r.exec.blocks_copied(), 0);
    } else {
      EXPECT_EQ(r.exec.blocks_copied(), 0);
    }
  }
}

}  // namespace
}  // namespace pagoda
