// Preemption by swap through the whole engine (stories260K, CPU backend):
// greedy outputs are the same with no preemption (a large KV pool), with
// preemption by recompute and by swap under a KV pool sized to force many
// preemptions, also for n > 1 requests and when the swap space is too small
// (recompute fallback); the engine counts the preemptions and swaps, the
// scheduler's and block manager's invariants are checked after every
// schedule and postprocess (EngineConfig::check_invariants), and at the end
// no device or host block is in use.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model/llama.h"
#include "engine/output_channel.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> d(3, 511);  // stories260K's ids, no BOS/EOS
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = d(rng);
  return v;
}

// Bytes of one KV block of stories260K on the CPU backend (fp32).
size_t bytes_per_block(const ExecutorOptions& o) {
  return LlamaModel::kv_bytes_per_block(ModelConfig::from_dir(o.model_dir), o.block_size,
                                        DType::F32);
}

struct Result {
  std::vector<std::vector<std::vector<int32_t>>> outs;  // [request][choice] token ids
  EngineStats stats;
  int64_t max_swapped = 0;     // EngineStats::num_swapped, most seen after a step
  double max_cpu_usage = 0.0;  // EngineStats::cpu_cache_usage(), most seen
};

// Eight requests (n choices each, seeded sampling when n > 1, else greedy)
// on an engine with `kv_blocks` KV blocks, `host_blocks` swap blocks and
// `mode`.
Result run(int64_t kv_blocks, int64_t host_blocks, std::optional<PreemptionMode> mode, int n = 1,
           bool caching = true) {
  ExecutorOptions opts = test::stories_options();
  opts.max_num_batched_tokens = 48;
  opts.num_gpu_blocks_override = kv_blocks;
  opts.swap_space_bytes = static_cast<size_t>(host_blocks) * bytes_per_block(opts);
  EngineConfig cfg = test::test_engine_config(opts);
  cfg.preemption_mode = mode;
  cfg.check_invariants = true;
  cfg.enable_prefix_caching = caching;
  auto engine = test::make_test_engine(opts, cfg);
  std::mt19937 rng(17);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  for (int i = 0; i < 8; ++i) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = fmt::format("r{}", i);
    req->prompt_token_ids = random_tokens(rng, static_cast<size_t>(12 + (i * 11) % 29));
    req->sampling.max_tokens = 40;
    req->sampling.ignore_eos = true;
    if (n == 1) {
      req->sampling.temperature = 0.0f;
    } else {
      req->sampling.n = n;
      req->sampling.seed = 100 + static_cast<uint64_t>(i);
    }
    req->output = std::make_shared<OutputChannel>();
    chans.push_back(req->output);
    engine->add_request(std::move(req));
  }
  // Step by step: the published stats show the swapped sequences and the
  // swap space in use while it happens.
  Result r;
  for (int k = 0; k < 100000 && !engine->idle(); ++k) {
    engine->step();
    const EngineStats st = engine->stats();
    r.max_swapped = std::max(r.max_swapped, st.num_swapped);
    r.max_cpu_usage = std::max(r.max_cpu_usage, st.cpu_cache_usage());
    EXPECT_EQ(st.cpu_kv_blocks_used > 0, st.num_swapped > 0);
  }
  EXPECT_TRUE(engine->idle());
  for (auto& ch : chans) {
    std::vector<std::vector<int32_t>> choices;
    for (const RequestOutput& c : collect_all(*ch)) {
      EXPECT_EQ(c.error, "");
      EXPECT_EQ(c.token_ids.size(), 40u);
      choices.push_back(c.token_ids);
    }
    EXPECT_EQ(choices.size(), static_cast<size_t>(n));
    r.outs.push_back(choices);
  }
  r.stats = engine->stats();
  EXPECT_EQ(r.stats.kv_blocks_used, 0);
  EXPECT_EQ(r.stats.cpu_kv_blocks_used, 0);
  EXPECT_EQ(r.stats.num_swapped, 0);
  EXPECT_EQ(r.stats.cpu_kv_blocks_total, host_blocks);
  return r;
}

// 10 blocks of 16 slots for eight requests of up to 80 tokens.
constexpr int64_t kTinyPool = 10;
constexpr int64_t kLargePool = 64;

TEST(EngineSwap, GreedyIdsAreTheSameWithoutPreemptionWithRecomputeAndWithSwap) {
  const Result none = run(kLargePool, 0, PreemptionMode::kRecompute);
  EXPECT_EQ(none.stats.num_preemptions_total, 0);
  const Result recompute = run(kTinyPool, 64, PreemptionMode::kRecompute);
  EXPECT_GT(recompute.stats.num_preemptions_total, 0);
  EXPECT_EQ(recompute.stats.num_swap_outs_total, 0);
  const Result swap = run(kTinyPool, 64, PreemptionMode::kSwap);
  EXPECT_GT(swap.stats.num_preemptions_total, 0);
  EXPECT_GT(swap.stats.num_swap_outs_total, 0);
  EXPECT_EQ(swap.stats.num_swap_ins_total, swap.stats.num_swap_outs_total);
  EXPECT_EQ(swap.stats.num_swap_fallbacks_total, 0);
  EXPECT_GT(swap.max_swapped, 0);
  EXPECT_GT(swap.max_cpu_usage, 0.0);
  EXPECT_EQ(recompute.max_swapped, 0);
  EXPECT_EQ(recompute.outs, none.outs);
  EXPECT_EQ(swap.outs, none.outs);
  // Without prefix caching every swapped block is copied back.
  const Result swap_nocache = run(kTinyPool, 64, PreemptionMode::kSwap, 1, /*caching=*/false);
  EXPECT_GT(swap_nocache.stats.num_swap_outs_total, 0);
  EXPECT_EQ(swap_nocache.outs, none.outs);
}

TEST(EngineSwap, ParallelSamplesAreTheSameUnderSwap) {
  // n = 3 seeded samples per request: the default rule swaps these groups.
  const Result none = run(kLargePool, 0, std::nullopt, 3);
  EXPECT_EQ(none.stats.num_preemptions_total, 0);
  const Result by_default = run(kTinyPool * 2, 64, std::nullopt, 3);
  EXPECT_GT(by_default.stats.num_swap_outs_total, 0);
  EXPECT_EQ(by_default.outs, none.outs);
  const Result swap = run(kTinyPool * 2, 64, PreemptionMode::kSwap, 3);
  EXPECT_GT(swap.stats.num_swap_outs_total, 0);
  EXPECT_EQ(swap.outs, none.outs);
}

TEST(EngineSwap, ATooSmallSwapSpaceFallsBackToRecomputeWithTheSameIds) {
  const Result none = run(kLargePool, 0, PreemptionMode::kRecompute);
  const Result small = run(kTinyPool, 2, PreemptionMode::kSwap);  // 2 blocks of swap space
  EXPECT_GT(small.stats.num_swap_fallbacks_total, 0);
  EXPECT_EQ(small.outs, none.outs);
  const Result zero = run(kTinyPool, 0, PreemptionMode::kSwap);  // no swap space at all
  EXPECT_GT(zero.stats.num_preemptions_total, 0);
  EXPECT_EQ(zero.stats.num_swap_outs_total, 0);
  EXPECT_EQ(zero.stats.num_swap_fallbacks_total, zero.stats.num_preemptions_total);
  EXPECT_EQ(zero.outs, none.outs);
}

TEST(EngineSwap, RequestsLargerThanTheDevicePoolEndClearlyUnderSwap) {
  // The engine allows 256 tokens, the device pool holds 128 (8 blocks).
  ExecutorOptions opts = test::stories_options();
  opts.num_gpu_blocks_override = 8;
  opts.swap_space_bytes = 64 * bytes_per_block(opts);
  EngineConfig cfg = test::test_engine_config(opts);
  cfg.max_model_len = 256;
  cfg.preemption_mode = PreemptionMode::kSwap;
  cfg.check_invariants = true;
  auto engine = test::make_test_engine(opts, cfg);
  std::mt19937 rng(3);
  // A prompt that can never fit: refused at once.
  auto big = test::add_greedy_request(*engine, "big", random_tokens(rng, 150), 10);
  // One that fits (7 blocks) but cannot grow to its max_tokens, beside
  // another (1 block): the other is preempted by swap at its 17th token,
  // "grows" takes the whole pool and ends by length when even alone it
  // cannot have a 9th block; the other resumes and finishes.
  auto grows = test::add_greedy_request(*engine, "grows", random_tokens(rng, 100), 60);
  auto other = test::add_greedy_request(*engine, "other", random_tokens(rng, 10), 20);
  engine->run_until_idle();
  const RequestOutput b = collect(*big);
  EXPECT_NE(b.error.find("can never fit the KV cache"), std::string::npos) << b.error;
  const RequestOutput g = collect(*grows);
  EXPECT_EQ(g.error, "");
  EXPECT_EQ(g.finish_reason, FinishReason::kLength);
  // 128 tokens computed fill the pool; the 29th sampled token is the last.
  EXPECT_EQ(g.token_ids.size(), 29u);
  const RequestOutput o = collect(*other);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.token_ids.size(), 20u);
  const EngineStats st = engine->stats();
  EXPECT_EQ(st.num_swap_outs_total, 1);
  EXPECT_EQ(st.num_swap_ins_total, 1);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.cpu_kv_blocks_used, 0);
}

}  // namespace
}  // namespace pagoda
