// A seeded simulation of the engine core (issue 15): the real Scheduler and
// BlockManager (prefix caching on) with the FakeExecutor, whose KV slots
// hold the tokens written and the hash of the context they were written
// for, so a block reused for the wrong prefix is caught when it is read.
// Random arrivals (shared prefixes, n > 1 / best_of, stop strings),
// aborts, EOS and lengths over a tiny pool, the updates routed through the
// OutputProcessor as the Engine routes them (a stop string ends its
// sequence through Scheduler::stop); after every step the
// scheduler's and block manager's invariants are checked (reference counts
// equal the tables holding each block, the free list holds exactly the
// unreferenced blocks, recorded blocks hold their sequences' tokens and
// their hashes match their tokens; the processor holds exactly the
// scheduler's requests). At the end every request has finished
// or been aborted and the pool is all free. In swap mode (preemption by
// swap into a small host pool, which also runs full and falls back to
// recompute) the FakeExecutor copies the slots' tokens and hashes on every
// swap, and at the end every host block is free. Partial-block prefix hits
// (a recomputed or resent sequence continuing a released partial block) are
// copied block by block (BlockCopy), the FakeExecutor copying the slots too.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/kv/host_block_pool.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/sched/scheduler.h"
#include "engine_test_fakes.h"
#include "scheduler_rig.h"

namespace pagoda {
namespace {

using testing::FakeExecutor;
using testing::FakeTokenizer;
using testing::route_updates;

struct Live {
  std::shared_ptr<OutputChannel> out;
  int n = 1;         // choices the request returns
  int finished = 0;  // final deltas seen (one per choice)
};

// host_blocks > 0: a swap space of that many blocks and `mode` (unset:
// vLLM's rule); 0: no swap space (every preemption recomputes).
void simulate(uint64_t seed, int64_t steps, int64_t num_blocks, int64_t block_size,
              int64_t max_batched, int64_t host_blocks = 0,
              std::optional<PreemptionMode> mode = std::nullopt) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(host_blocks) +
               " host blocks");
  std::mt19937_64 rng(seed);
  std::mt19937_64 stop_rng(seed + 1000);
  const auto pick = [&](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const auto chance = [&](double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng) < p;
  };
  constexpr int64_t kVocab = 40;
  FakeTokenizer tok(kVocab);
  FakeExecutor exec(kVocab, num_blocks, block_size, host_blocks);
  BlockManager blocks(num_blocks, block_size, /*enable_caching=*/true);
  HostBlockPool host(host_blocks);
  SchedulerConfig cfg;
  cfg.max_num_seqs = 6;
  cfg.max_num_batched_tokens = max_batched;
  cfg.max_model_len = num_blocks * block_size;
  cfg.eos_token_ids = {2};
  cfg.preemption_mode = mode;
  Scheduler sched(cfg, blocks, host_blocks > 0 ? &host : nullptr);
  OutputProcessor outputs(tok);
  ModelRunner runner(exec);
  int64_t stopped_by_string = 0;
  const auto route = [&](std::span<const SequenceUpdate> updates) {
    stopped_by_string +=
        static_cast<int64_t>(route_updates(outputs, sched, updates).stopped.size());
  };

  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(pick(1, 3 * block_size)));
    for (int32_t& t : p) t = static_cast<int32_t>(pick(3, kVocab - 1));
    prefixes.push_back(std::move(p));
  }
  std::map<std::string, Live> live;
  std::vector<std::string> pending;  // ids not yet seen finished
  int64_t next_id = 0, aborted = 0, arrived = 0;
  std::vector<float> logits;
  std::vector<TokenLogprob> sampled;
  const int64_t quiet_after = steps * 9 / 10;  // then no arrivals: drain
  for (int64_t step = 0; step < steps; ++step) {
    if (step < quiet_after && chance(0.3)) {  // an arrival
      GenerateRequest req;
      req.request_id = "r" + std::to_string(next_id++);
      if (chance(0.7)) req.prompt_token_ids = prefixes[static_cast<size_t>(pick(0, 3))];
      const int64_t tail = pick(chance(0.5) ? 0 : 1, 2 * block_size);
      for (int64_t k = 0; k < tail; ++k)
        req.prompt_token_ids.push_back(static_cast<int32_t>(pick(3, kVocab - 1)));
      if (req.prompt_token_ids.empty()) req.prompt_token_ids.push_back(5);
      const int64_t room = cfg.max_model_len - static_cast<int64_t>(req.prompt_token_ids.size());
      if (room < 1) continue;
      req.sampling.ignore_eos = chance(0.5);
      // Stop strings end sequences from the OutputProcessor (Scheduler::stop).
      // Drawn from their own stream: the traffic of each seed is the same as
      // without them.
      if (stop_rng() % 5 == 0)
        req.sampling.stop = {
            FakeTokenizer::piece(static_cast<int32_t>(3 + stop_rng() % (kVocab - 3)))};
      req.output = std::make_shared<OutputChannel>();
      const int64_t max_tokens = pick(1, std::min<int64_t>(room, 3 * block_size));
      const int best_of = chance(0.2) ? static_cast<int>(pick(2, 3)) : 1;
      auto g = std::make_unique<SequenceGroup>();
      g->request_id = req.request_id;
      g->best_of = best_of;
      g->n = static_cast<int>(pick(1, best_of));
      req.sampling.n = g->n;
      req.sampling.best_of = best_of;
      for (int i = 0; i < best_of; ++i)
        g->seqs.push_back(std::make_unique<Sequence>(req, max_tokens, rng(), i));
      outputs.add_request(req);
      live[req.request_id] = Live{req.output, g->n, 0};
      pending.push_back(req.request_id);
      sched.add_group(std::move(g));
      ++arrived;
    }
    if (chance(0.03)) {  // an abort of a random unfinished request
      std::erase_if(pending, [&](const std::string& id) { return !sched.contains(id); });
      if (!pending.empty()) {
        const std::string& id =
            pending[static_cast<size_t>(pick(0, static_cast<int64_t>(pending.size()) - 1))];
        const bool known = outputs.abort(id);
        if (sched.abort(id)) ++aborted;
        EXPECT_TRUE(known) << id;
      }
    }
    SchedulerOutput out = sched.schedule();
    route(out.finished);
    runner.apply_swaps(out);
    if (!out.empty()) {
      runner.execute(out, logits);  // FakeExecutor: checks every KV read
      sampled.clear();
      for (const ScheduledSeq& s : out.seqs) {
        if (!s.samples) continue;
        TokenLogprob t;
        t.token_id = chance(0.05) ? 2 : static_cast<int32_t>(pick(3, kVocab - 1));
        t.logprob = -static_cast<float>(pick(0, 100)) / 10.0f;
        sampled.push_back(t);
      }
      route(sched.postprocess(out, sampled).updates);
    }
    sched.check_invariants();
    // One finished state: the processor holds exactly the scheduler's
    // requests (ids seen gone leave `pending`).
    std::erase_if(pending, [&](const std::string& id) {
      const bool held = sched.contains(id);
      EXPECT_EQ(held, outputs.contains(id)) << id << " at step " << step;
      return !held;
    });
  }
  // Whatever is left finishes without new arrivals.
  for (int64_t k = 0; k < 100000 && sched.has_unfinished(); ++k) {
    SchedulerOutput out = sched.schedule();
    route(out.finished);
    runner.apply_swaps(out);
    if (out.empty()) continue;
    runner.execute(out, logits);
    sampled.assign(static_cast<size_t>(out.num_samples()), TokenLogprob{});
    for (TokenLogprob& t : sampled) t.token_id = static_cast<int32_t>(pick(3, kVocab - 1));
    route(sched.postprocess(out, sampled).updates);
    sched.check_invariants();
  }
  EXPECT_FALSE(sched.has_unfinished());
  EXPECT_EQ(outputs.num_requests(), 0u);
  EXPECT_GT(stopped_by_string, 0);
  for (auto& [id, l] : live) {  // every choice of every request ended once (finished or aborted)
    for (const RequestOutput& d : l.out->drain()) l.finished += d.finished ? 1 : 0;
    EXPECT_EQ(l.finished, l.n) << id;
  }
  EXPECT_EQ(blocks.num_used(), 0);
  EXPECT_EQ(blocks.num_free(), num_blocks);
  blocks.check_invariants();
  EXPECT_EQ(host.num_used(), 0);
  EXPECT_EQ(sched.num_swapped(), 0);
  host.check_invariants();
  if (host_blocks > 0) {  // default rule too: the groups swap
    EXPECT_GT(sched.num_swap_outs_total(), 0);
    EXPECT_GT(exec.blocks_swapped_in(), 0);
  }
  if (host_blocks == 0) {
    EXPECT_EQ(sched.num_swap_outs_total(), 0);
  }
  EXPECT_GT(arrived, steps / 10);
  EXPECT_GT(aborted, 0);
  EXPECT_GT(sched.num_preemptions_total(), 0);
  EXPECT_GT(sched.prefix_cache_hits(), 0);
  EXPECT_GT(exec.blocks_copied(), 0);  // partial-block hits (recomputed sequences, shared prefixes)
  EXPECT_GT(exec.calls(), steps / 4);
}

TEST(SchedulerSimulation, InvariantsHoldOverRandomTrafficOnATinyPool) {
  simulate(1, 100000, 12, 4, 24);
}

TEST(SchedulerSimulation, SwapModeOverRandomTraffic) {
  // A host pool of 6 blocks: swaps, and recompute when it is full.
  simulate(4, 30000, 12, 4, 24, 6, PreemptionMode::kSwap);
  simulate(5, 10000, 7, 8, 16, 3, PreemptionMode::kSwap);
  simulate(6, 10000, 20, 2, 32, 40, PreemptionMode::kSwap);  // room for all
}

TEST(SchedulerSimulation, VllmsDefaultPreemptionRuleOverRandomTraffic) {
  // Unset mode: groups (n > 1 / best_of) swap, single sequences recompute.
  simulate(7, 20000, 12, 4, 24, 8);
}

TEST(SchedulerSimulation, OtherSeedsAndShapes) {
  simulate(2, 10000, 7, 8, 16);   // blocks of 8, a pool of 56 slots
  simulate(3, 10000, 20, 2, 32);  // many small blocks
}

}  // namespace
}  // namespace pagoda
