// Automatic prefix caching through the whole engine (stories260K, CPU):
// a request that shares a long prefix with an earlier one prefills only its
// new tokens, and greedy outputs are the same with the cache on and off —
// also when a tiny KV pool forces preemptions while prefixes are shared.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

using test::add_greedy_request;

// Token ids of stories260K's vocabulary (3..511: no BOS/EOS), seeded.
std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> d(3, 511);
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = d(rng);
  return v;
}

TEST(EnginePrefixCache, ASecondRequestSharingALongPrefixPrefillsOnlyItsNewTokens) {
  ExecutorOptions opts = test::stories_options();
  opts.max_model_len = 512;
  opts.max_num_batched_tokens = 512;
  std::mt19937 rng(11);
  const std::vector<int32_t> prefix = random_tokens(rng, 400);  // 25 blocks of 16
  std::vector<int32_t> p1 = prefix, p2 = prefix;
  for (int32_t t : random_tokens(rng, 21)) p1.push_back(t);
  for (int32_t t : random_tokens(rng, 9)) p2.push_back(t);

  std::vector<std::vector<int32_t>> outs[2];
  for (const bool caching : {false, true}) {
    auto engine = test::make_test_engine(opts, 0, 256, caching);
    // The same prompt again hits every full prompt block (26 of its 421
    // tokens); the first run's output blocks are not part of its prompt.
    struct Case {
      std::string id;
      const std::vector<int32_t>* prompt;
      int64_t hit;
    };
    const Case cases[] = {{"first", &p1, 0}, {"second", &p2, 400}, {"again", &p1, 416}};
    for (const Case& c : cases) {
      const EngineStats before = engine->stats();
      auto ch = add_greedy_request(*engine, c.id, *c.prompt, 24);
      engine->run_until_idle();
      const RequestOutput got = collect(*ch);
      ASSERT_EQ(got.error, "");
      ASSERT_EQ(got.token_ids.size(), 24u);
      outs[caching].push_back(got.token_ids);
      const EngineStats after = engine->stats();
      const int64_t queried = after.prefix_cache_queries_total - before.prefix_cache_queries_total;
      const int64_t hit = after.prefix_cache_hits_total - before.prefix_cache_hits_total;
      EXPECT_EQ(queried, caching ? static_cast<int64_t>(c.prompt->size()) : 0) << c.id;
      EXPECT_EQ(hit, caching ? c.hit : 0) << c.id;  // "second": only its 9 new tokens prefilled
      // The request's own count (vLLM's RequestOutput.num_cached_tokens).
      EXPECT_EQ(got.num_cached_tokens, caching ? c.hit : 0) << c.id;
      EXPECT_EQ(after.kv_blocks_used, 0);
    }
  }
  EXPECT_EQ(outs[true], outs[false]);
  EXPECT_EQ(outs[true][2], outs[true][0]);
}

// vLLM's cache_salt: the salt starts the block hash chain, so requests with
// different salts (or one salted, one not) share no cached block, full or
// partial, while requests with the same salt share as unsalted ones do; the
// outputs are the same either way.
TEST(EnginePrefixCache, OnlyRequestsWithTheSameCacheSaltShareBlocks) {
  ExecutorOptions opts = test::stories_options();
  opts.max_model_len = 512;
  opts.max_num_batched_tokens = 512;
  std::mt19937 rng(17);
  const std::vector<int32_t> prompt = random_tokens(rng, 100);  // 6 full blocks of 16, then 4
  auto engine = test::make_test_engine(opts, 0, 256, /*caching=*/true);
  struct Case {
    std::string id, salt;
    int64_t hit;  // prompt tokens read from the cache
  };
  // After a run of the prompt with salt S, the next request with S reads
  // its 6 full blocks and 3 of the partial block's 4 prompt tokens (all but
  // the last prompt token: 99).
  const Case cases[] = {{"a1", "tenant-a", 0},     {"b1", "tenant-b", 0},  {"none1", "", 0},
                        {"a2", "tenant-a", 99},    {"b2", "tenant-b", 99}, {"none2", "", 99},
                        {"a-prefix", "tenant-", 0}};
  std::vector<int32_t> first_ids;
  for (const Case& c : cases) {
    const EngineStats before = engine->stats();
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = c.id;
    req->prompt_token_ids = prompt;
    req->sampling.temperature = 0.0f;
    req->sampling.ignore_eos = true;
    req->sampling.max_tokens = 4;
    req->cache_salt = c.salt;
    req->output = std::make_shared<OutputChannel>();
    auto ch = req->output;
    engine->add_request(std::move(req));
    engine->run_until_idle();
    const RequestOutput got = collect(*ch);
    ASSERT_EQ(got.error, "") << c.id;
    const EngineStats after = engine->stats();
    EXPECT_EQ(after.prefix_cache_hits_total - before.prefix_cache_hits_total, c.hit) << c.id;
    EXPECT_EQ(got.num_cached_tokens, c.hit) << c.id;
    if (first_ids.empty()) first_ids = got.token_ids;
    EXPECT_EQ(got.token_ids, first_ids) << c.id;
  }
}

TEST(EnginePrefixCache, PromptLogprobsRequestsComputeEveryPromptPosition) {
  // A cached prompt asked again with prompt_logprobs: no lookup (every
  // position's logits are needed), all P - 1 entries, same ids as a fresh
  // engine's.
  ExecutorOptions opts = test::stories_options();
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_tokens(rng, 70);
  std::vector<std::vector<PromptLogprob>> got;
  for (const bool warm : {true, false}) {
    auto engine = test::make_test_engine(opts);
    if (warm) {
      add_greedy_request(*engine, "warm", prompt, 4);
      engine->run_until_idle();
    }
    const EngineStats before = engine->stats();
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = "scored";
    req->prompt_token_ids = prompt;
    req->sampling.temperature = 0.0f;
    req->sampling.max_tokens = 2;
    req->sampling.prompt_logprobs = 1;
    req->output = std::make_shared<OutputChannel>();
    auto ch = req->output;
    engine->add_request(std::move(req));
    engine->run_until_idle();
    const std::vector<RequestOutput> deltas = collect_all(*ch);
    ASSERT_FALSE(deltas.empty());
    ASSERT_TRUE(deltas.front().prompt_logprobs.has_value());
    got.push_back(*deltas.front().prompt_logprobs);
    EXPECT_EQ(got.back().size(), prompt.size() - 1);
    EXPECT_EQ(engine->stats().prefix_cache_hits_total, before.prefix_cache_hits_total);
  }
  ASSERT_EQ(got[0].size(), got[1].size());
  for (size_t i = 0; i < got[0].size(); ++i) {
    EXPECT_EQ(got[0][i].token_id, got[1][i].token_id) << i;
    EXPECT_NEAR(got[0][i].logprob, got[1][i].logprob, 1e-5) << i;
  }
}

TEST(EnginePrefixCache, GreedyIdsAreTheSameWithAndWithoutTheCacheThroughPreemption) {
  // Eight requests over three shared prefixes, admitted together into a KV
  // pool of 10 blocks (160 slots) that cannot hold them all: preemption by
  // recompute, cached blocks evicted and taken back, chunked prefills.
  ExecutorOptions opts = test::stories_options();
  opts.max_model_len = 128;
  opts.max_num_batched_tokens = 48;
  opts.num_gpu_blocks_override = 10;
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> prefixes = {random_tokens(rng, 37), random_tokens(rng, 16),
                                                random_tokens(rng, 50)};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = prefixes[static_cast<size_t>(i % 3)];
    for (int32_t t : random_tokens(rng, static_cast<size_t>(1 + (i * 7) % 13))) p.push_back(t);
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> outs[2];
  int64_t preemptions[2] = {0, 0}, hits[2] = {0, 0};
  for (const bool caching : {false, true}) {
    auto engine = test::make_test_engine(opts, 0, 256, caching);
    std::vector<std::shared_ptr<OutputChannel>> chans;
    for (size_t i = 0; i < prompts.size(); ++i) {
      chans.push_back(add_greedy_request(*engine, fmt::format("r{}", i), prompts[i], 40));
    }
    engine->run_until_idle();
    for (auto& ch : chans) {
      const RequestOutput got = collect(*ch);
      ASSERT_EQ(got.error, "");
      outs[caching].push_back(got.token_ids);
    }
    const EngineStats st = engine->stats();
    preemptions[caching] = st.num_preemptions_total;
    hits[caching] = st.prefix_cache_hits_total;
    EXPECT_EQ(st.kv_blocks_used, 0);
  }
  EXPECT_EQ(outs[true], outs[false]);
  EXPECT_GT(preemptions[false], 0);
  EXPECT_GT(preemptions[true], 0);
  EXPECT_GT(hits[true], 0);
  EXPECT_EQ(hits[false], 0);
}

}  // namespace
}  // namespace pagoda
