// Preemption by swap in the Scheduler (vLLM v0's _preempt_by_swap /
// _swap_in): a victim's blocks go to host blocks in the step's swap_out
// list, it resumes before waiting requests with its blocks swapped back in,
// a full swap space falls back to recompute, vLLM's default rule picks the
// mode per request, and an abort frees a swapped request's host blocks.
// The FakeExecutor keeps each KV slot's token and context hash and copies
// them on swaps, so a block swapped back wrongly (or not at all) throws when
// read; the invariants are checked after every schedule and postprocess.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/kv/host_block_pool.h"
#include "engine/model_runner.h"
#include "engine/sched/scheduler.h"
#include "engine_test_fakes.h"
#include "scheduler_rig.h"

namespace pagoda {
namespace {

constexpr int64_t kVocab = 40;
constexpr int64_t kBlock = 4;

struct Rig : testing::SchedulerRig {
  Rig(int64_t num_blocks, int64_t host_blocks, std::optional<PreemptionMode> mode,
      bool caching = false)
      : SchedulerRig(config(num_blocks, mode), kVocab, num_blocks, kBlock, host_blocks, caching) {}
  static SchedulerConfig config(int64_t num_blocks, std::optional<PreemptionMode> mode) {
    SchedulerConfig c;
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 64;
    c.max_model_len = num_blocks * kBlock;
    c.eos_token_ids = {2};
    c.preemption_mode = mode;
    return c;
  }
};

int64_t output_tokens(OutputChannel& ch) {
  int64_t n = 0;
  for (const RequestOutput& d : ch.drain()) n += static_cast<int64_t>(d.token_ids.size());
  return n;
}

// Two requests of 6 prompt tokens and 8 output tokens in 4 blocks of 4: at
// their 9th token "b" (admitted last) is preempted; "a" then needs all 4
// blocks to finish, and "b" comes back.
TEST(SchedulerSwap, AVictimsBlocksGoToTheHostAndComeBackBeforeItResumes) {
  Rig r(4, 8, PreemptionMode::kSwap);
  auto a = r.add("a", 6, 8);
  auto b = r.add("b", 6, 8);
  bool swapped_out = false, swapped_in = false;
  for (int k = 0; k < 100 && r.sched.has_unfinished(); ++k) {
    const SchedulerOutput out = r.step();
    EXPECT_FALSE(!out.swap_out.empty() && !out.swap_in.empty());
    if (out.num_swapped_out > 0) {
      swapped_out = true;
      // b had 8 tokens computed: its 2 blocks go to 2 host blocks.
      EXPECT_EQ(out.num_swapped_out, 1);
      EXPECT_EQ(out.swap_out.size(), 2u);
      EXPECT_EQ(out.swap_out[0].host, 0);
      EXPECT_EQ(out.swap_out[1].host, 1);
      EXPECT_EQ(r.sched.num_swapped(), 1);
      EXPECT_EQ(r.host.num_used(), 2);
      for (const auto& [id, n] : r.scheduled) EXPECT_EQ(id, "a");
    }
    if (out.num_swapped_in > 0) {
      swapped_in = true;
      EXPECT_TRUE(swapped_out);
      EXPECT_EQ(out.swap_in.size(), 2u);  // no prefix caching: both blocks copied back
      EXPECT_EQ(r.host.num_used(), 0);
      EXPECT_EQ(r.sched.num_swapped(), 0);
      ASSERT_EQ(out.seqs.size(), 1u);
      EXPECT_EQ(r.scheduled[0].first, "b");
      EXPECT_EQ(out.seqs[0].num_new_tokens, 1);  // a decode: nothing recomputed
    }
  }
  EXPECT_TRUE(swapped_out);
  EXPECT_TRUE(swapped_in);
  EXPECT_FALSE(r.sched.has_unfinished());
  EXPECT_EQ(output_tokens(*a), 8);
  EXPECT_EQ(output_tokens(*b), 8);
  EXPECT_EQ(r.sched.num_preemptions_total(), 1);
  EXPECT_EQ(r.sched.num_swap_outs_total(), 1);
  EXPECT_EQ(r.sched.num_swap_ins_total(), 1);
  EXPECT_EQ(r.sched.num_swap_fallbacks_total(), 0);
  EXPECT_EQ(r.exec.blocks_swapped_out(), 2);
  EXPECT_EQ(r.exec.blocks_swapped_in(), 2);
  EXPECT_EQ(r.blocks.num_used(), 0);
  EXPECT_EQ(r.host.num_used(), 0);
}

TEST(SchedulerSwap, SwappedRequestsResumeBeforeWaitingOnes) {
  Rig r(4, 8, PreemptionMode::kSwap);
  r.add("a", 6, 8);
  r.add("b", 6, 8);
  while (r.sched.num_swapped() == 0) {
    ASSERT_TRUE(r.sched.has_unfinished());
    r.step();
  }
  r.add("c", 2, 2);  // would fit beside "a" now; waits for "b" to resume
  bool b_back = false;
  for (int k = 0; k < 100 && r.sched.has_unfinished(); ++k) {
    r.step();
    for (const auto& [id, n] : r.scheduled) {
      if (id == "b") b_back = true;
      if (id == "c") {
        EXPECT_TRUE(b_back) << "c ran before the swapped b resumed";
      }
    }
  }
  EXPECT_TRUE(b_back);
}

TEST(SchedulerSwap, AFullSwapSpaceFallsBackToRecompute) {
  Rig r(4, 1, PreemptionMode::kSwap);  // b's 2 blocks do not fit 1 host block
  auto a = r.add("a", 6, 8);
  auto b = r.add("b", 6, 8);
  const std::vector<SchedulerOutput> outs = r.run_to_end();
  for (const SchedulerOutput& out : outs) {
    EXPECT_TRUE(out.swap_out.empty());
    EXPECT_TRUE(out.swap_in.empty());
  }
  EXPECT_EQ(output_tokens(*a), 8);
  EXPECT_EQ(output_tokens(*b), 8);
  EXPECT_GE(r.sched.num_preemptions_total(), 1);
  EXPECT_EQ(r.sched.num_swap_fallbacks_total(), r.sched.num_preemptions_total());
  EXPECT_EQ(r.sched.num_swap_outs_total(), 0);
  EXPECT_EQ(r.host.num_used(), 0);
}

// vLLM v0 warns on the 1st, 51st, 101st, ... preemption: captured from the
// default logger over enough rounds of the two-request squeeze above.
TEST(SchedulerSwap, EveryFiftiethPreemptionIsLogged) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  Rig r(4, 0, PreemptionMode::kRecompute);
  for (int round = 0; round < 200 && r.sched.num_preemptions_total() < 101; ++round) {
    for (const char* who : {"a", "b"}) {
      std::string id = who;
      id += std::to_string(round);  // (GCC 12's -Wrestrict misfires on "a" + to_string)
      r.add(id, 6, 8);
    }
    r.run_to_end();
  }
  spdlog::set_default_logger(previous);
  const int64_t total = r.sched.num_preemptions_total();
  ASSERT_GE(total, 101);
  std::vector<std::string> warnings;
  for (const std::string& line : sink->last_formatted())
    if (line.find("preempted by recompute") != std::string::npos) warnings.push_back(line);
  ASSERT_EQ(static_cast<int64_t>(warnings.size()), (total - 1) / 50 + 1);
  EXPECT_NE(warnings[0].find("Request b0 "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("(1 preemption(s) so far"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("(51 preemption(s) so far"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("(101 preemption(s) so far"), std::string::npos) << warnings[2];
}

TEST(SchedulerSwap, RecomputeModeNeverSwaps) {
  Rig r(4, 8, PreemptionMode::kRecompute);
  r.add("a", 6, 8);
  r.add("b", 6, 8);
  r.run_to_end();
  EXPECT_GE(r.sched.num_preemptions_total(), 1);
  EXPECT_EQ(r.sched.num_swap_outs_total(), 0);
  EXPECT_EQ(r.sched.num_swap_fallbacks_total(), 0);
  EXPECT_EQ(r.exec.blocks_swapped_out(), 0);
}

// vLLM v0's default (no --preemption-mode): recompute for a request with
// one running sequence, swap for a request with several.
TEST(SchedulerSwap, TheDefaultRuleRecomputesSingleSequencesAndSwapsGroups) {
  Rig single(4, 8, std::nullopt);
  single.add("a", 6, 8);
  single.add("b", 6, 8);
  single.run_to_end();
  EXPECT_GE(single.sched.num_preemptions_total(), 1);
  EXPECT_EQ(single.sched.num_swap_outs_total(), 0);

  // "s" holds 2 blocks, "g" (best_of 2) prefills into the other 2; its
  // second sample then needs a block of its own: the group's sample is
  // preempted, by swap (two running sequences).
  Rig group(4, 8, std::nullopt);
  auto s = group.add("s", 6, 8);
  auto g = group.add("g", 6, 6, /*best_of=*/2);
  group.run_to_end();
  EXPECT_GE(group.sched.num_swap_outs_total(), 1);
  EXPECT_EQ(group.sched.num_swap_ins_total(), group.sched.num_swap_outs_total());
  EXPECT_EQ(output_tokens(*s), 8);
  EXPECT_EQ(output_tokens(*g), 12);
  EXPECT_EQ(group.host.num_used(), 0);
  EXPECT_EQ(group.blocks.num_used(), 0);
}

TEST(SchedulerSwap, AbortingASwappedRequestFreesItsHostBlocks) {
  Rig r(4, 8, PreemptionMode::kSwap);
  r.add("a", 6, 8);
  auto b = r.add("b", 6, 8);
  while (r.sched.num_swapped() == 0) {
    ASSERT_TRUE(r.sched.has_unfinished());
    r.step();
  }
  EXPECT_GT(r.host.num_used(), 0);
  EXPECT_TRUE(r.abort("b"));
  EXPECT_EQ(r.sched.num_swapped(), 0);
  EXPECT_EQ(r.host.num_used(), 0);
  r.sched.check_invariants();
  bool aborted = false;
  for (const RequestOutput& d : b->drain())
    aborted = aborted || d.finish_reason == FinishReason::kAbort;
  EXPECT_TRUE(aborted);
  r.run_to_end();
  EXPECT_EQ(r.blocks.num_used(), 0);
}

// With prefix caching, a swapped-in sequence takes its computed full blocks
// still cached on the device instead of copying them back; without it,
// every block swapped out is copied back.
TEST(SchedulerSwap, SwapInReusesBlocksStillInThePrefixCache) {
  // 5 blocks: "a" and "b" (6 + 8 tokens each) fill 4, then "b" is swapped
  // out; its freed blocks stay cached until "a" needs them.
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "caching" : "no caching");
    Rig r(5, 8, PreemptionMode::kSwap, caching);
    auto a = r.add("a", 6, 9);
    auto b = r.add("b", 6, 8);
    r.run_to_end();
    EXPECT_GE(r.sched.num_swap_outs_total(), 1);
    EXPECT_EQ(r.sched.num_swap_ins_total(), r.sched.num_swap_outs_total());
    if (caching) {
      EXPECT_LT(r.exec.blocks_swapped_in(), r.exec.blocks_swapped_out());
    } else {
      EXPECT_EQ(r.exec.blocks_swapped_in(), r.exec.blocks_swapped_out());
    }
    EXPECT_EQ(output_tokens(*a), 9);
    EXPECT_EQ(output_tokens(*b), 8);
    EXPECT_EQ(r.host.num_used(), 0);
  }
}

}  // namespace
}  // namespace pagoda
