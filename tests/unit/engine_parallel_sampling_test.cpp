// n > 1 and best_of through the Engine API with the FakeExecutor (a paged
// KV cache that rejects writes into shared blocks and stale reads) and the
// FakeTokenizer: prompt blocks shared once, every block freed at the end and
// on abort, each choice equal to the same request run alone with n = 1 (and
// seed + index), greedy choices equal to the unpaged reference, best_of
// ranking by cumulative logprob, preemption of groups, raw logprobs against
// a log-softmax computed here.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

using testing::FakeExecutor;
using testing::FakeTokenizer;
using testing::reference_greedy;
using testing::reference_logits;

constexpr int64_t kVocab = 40;
constexpr int32_t kEos = 2;

std::vector<int32_t> prompt_of(uint64_t id, int64_t len) {
  std::vector<int32_t> p = {1};
  for (int64_t j = 1; j < len; ++j)
    p.push_back(5 + static_cast<int32_t>(testing::mix64(id * 1000 + static_cast<uint64_t>(j)) % (kVocab - 5)));
  return p;
}

struct Harness {
  FakeExecutor* exec = nullptr;
  std::unique_ptr<Engine> engine;
  explicit Harness(int64_t num_blocks, int64_t block_size = 4, EngineConfig cfg = {})
      : Harness(std::make_unique<FakeExecutor>(kVocab, num_blocks, block_size), cfg) {}
  explicit Harness(std::unique_ptr<FakeExecutor> e, EngineConfig cfg = {}) {
    exec = e.get();
    cfg.eos_token_ids = {kEos};
    cfg.log_stats = false;
    engine = std::make_unique<Engine>(cfg, std::move(e), std::make_shared<FakeTokenizer>(kVocab));
  }
  std::shared_ptr<OutputChannel> add(const std::string& id, std::vector<int32_t> prompt, SamplingParams sp) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = id;
    req->prompt_token_ids = std::move(prompt);
    req->sampling = sp;
    req->output = std::make_shared<OutputChannel>();
    auto ch = req->output;
    engine->add_request(std::move(req));
    return ch;
  }
};

SamplingParams seeded(int n, uint64_t seed, int64_t max_tokens) {
  SamplingParams sp;
  sp.n = n;
  sp.seed = seed;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

// The request alone with n = 1 and the given seed.
RequestOutput run_alone(const std::vector<int32_t>& prompt, SamplingParams sp, uint64_t seed) {
  Harness h(256);
  sp.n = 1;
  sp.best_of.reset();
  sp.seed = seed;
  auto ch = h.add("alone", prompt, sp);
  h.engine->run_until_idle();
  return collect(*ch);
}

TEST(ParallelSampling, PromptBlocksAreSharedOnceAndAllFreedAtTheEnd) {
  // Block size 4, prompt 10 tokens: 2 full blocks + 1 partial. Separately,
  // 3 samples would hold 3 x 3 = 9 blocks and compute 30 prompt tokens; as
  // one request sample 0 holds 3 and, in the same step, samples 1 and 2
  // take its 2 full blocks from the prefix cache (recorded when the step was
  // scheduled) and each computes the partial block (tokens 8..9) into one
  // block of its own: 5 blocks, 10 + 2 + 2 prompt tokens computed.
  Harness h(64);
  std::vector<int32_t> p = prompt_of(1, 10);
  auto ch = h.add("g", p, seeded(3, 7, 6));
  ASSERT_TRUE(h.engine->step());  // prefill + 3 first tokens
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 3 + 2);
  EXPECT_EQ(h.engine->stats().num_running, 3);
  EXPECT_EQ(h.engine->stats().prefix_cache_hits_total, 2 * 8);
  ASSERT_TRUE(h.engine->step());  // every sample decodes in its own block
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 3 + 2);
  h.engine->run_until_idle();
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().requests_finished_total["length"], 1);
  ASSERT_TRUE(ch->finished());
  std::vector<RequestOutput> got = collect_all(*ch);
  ASSERT_EQ(got.size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 3; ++i) {
    const RequestOutput& c = got[static_cast<size_t>(i)];
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.finish_reason, FinishReason::kLength);
    EXPECT_EQ(c.token_ids.size(), 6u);
    distinct.insert(c.token_ids);
    // Choice i is the request alone with seed 7 + i (vLLM v1 child seeds).
    RequestOutput alone = run_alone(p, seeded(1, 0, 6), 7 + static_cast<uint64_t>(i));
    EXPECT_EQ(c.token_ids, alone.token_ids) << "choice " << i;
    EXPECT_EQ(c.text, alone.text) << "choice " << i;
  }
  EXPECT_EQ(distinct.size(), 3u);
}

TEST(ParallelSampling, PromptOfWholeBlocksSharesAllButItsLastBlock) {
  // As vLLM v1's child requests: a prefix hit leaves the last prompt token
  // to compute (its row samples), so samples 1..3 take block 0 and each
  // computes block 1 again.
  Harness h(64);
  std::vector<int32_t> p = prompt_of(2, 8);  // exactly 2 blocks
  auto ch = h.add("g", p, seeded(4, 3, 5));
  ASSERT_TRUE(h.engine->step());
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 2 + 3);
  EXPECT_EQ(h.engine->stats().prefix_cache_hits_total, 3 * 4);
  ASSERT_TRUE(h.engine->step());  // every sample's token 8 starts a block
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 2 + 3 + 4);
  h.engine->run_until_idle();
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  std::vector<RequestOutput> got = collect_all(*ch);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)].token_ids, run_alone(p, seeded(1, 0, 5), 3 + static_cast<uint64_t>(i)).token_ids);
}

TEST(ParallelSampling, GreedyChoicesAreIdenticalAndMatchTheReference) {
  for (int64_t len : {7, 8, 9}) {
    Harness h(64);
    std::vector<int32_t> p = prompt_of(3 + static_cast<uint64_t>(len), len);
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.n = 2;
    sp.max_tokens = 12;
    auto ch = h.add("g", p, sp);
    h.engine->run_until_idle();
    std::vector<RequestOutput> got = collect_all(*ch);
    ASSERT_EQ(got.size(), 2u);
    std::vector<int32_t> want = reference_greedy(p, 12, kVocab, {kEos});
    EXPECT_EQ(got[0].token_ids, want) << len;
    EXPECT_EQ(got[1].token_ids, want) << len;
    EXPECT_EQ(got[0].text, got[1].text);
    EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  }
}

TEST(ParallelSampling, StreamedDeltasCarryTheirChoiceIndex) {
  Harness h(64);
  auto ch = h.add("g", prompt_of(4, 6), seeded(3, 11, 4));
  std::vector<int> deltas(3, 0), finals(3, 0);
  while (h.engine->step()) {
    for (RequestOutput& d : ch->drain()) {
      ASSERT_GE(d.index, 0);
      ASSERT_LT(d.index, 3);
      deltas[static_cast<size_t>(d.index)]++;
      finals[static_cast<size_t>(d.index)] += d.finished ? 1 : 0;
    }
  }
  for (RequestOutput& d : ch->drain()) {
    deltas[static_cast<size_t>(d.index)]++;
    finals[static_cast<size_t>(d.index)] += d.finished ? 1 : 0;
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(deltas[static_cast<size_t>(i)], 4) << i;  // one per token, streamed
    EXPECT_EQ(finals[static_cast<size_t>(i)], 1) << i;
  }
  EXPECT_TRUE(ch->finished());
}

TEST(ParallelSampling, ChannelFinishesOnlyWhenEveryChoiceHas) {
  // Choice lengths differ (stop token 9 is likely hit at different steps
  // by different samples); the channel is finished only after the last.
  Harness h(64);
  SamplingParams sp = seeded(3, 5, 30);
  sp.stop_token_ids = {9, 10, 11, 12};
  auto ch = h.add("g", prompt_of(5, 5), sp);
  int finished_choices = 0;
  while (h.engine->step()) {
    for (RequestOutput& d : ch->drain()) finished_choices += d.finished ? 1 : 0;
    EXPECT_EQ(ch->finished(), finished_choices == 3);
  }
  for (RequestOutput& d : ch->drain()) finished_choices += d.finished ? 1 : 0;
  EXPECT_EQ(finished_choices, 3);
  EXPECT_TRUE(ch->finished());
}

TEST(ParallelSampling, AbortFreesEverySamplesBlocksAndEndsEveryChoice) {
  Harness h(64);
  auto ch = h.add("g", prompt_of(6, 10), seeded(3, 1, 50));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.engine->step());
  EXPECT_GE(h.engine->stats().kv_blocks_used, 5);
  h.engine->abort_request("g");
  h.engine->step();
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().num_running, 0);
  ASSERT_TRUE(ch->finished());
  std::vector<RequestOutput> got = collect_all(*ch);
  ASSERT_EQ(got.size(), 3u);
  for (const RequestOutput& c : got) {
    EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
    EXPECT_EQ(c.token_ids.size(), 4u);
  }

  // Aborted while still waiting: every choice ends.
  Harness w(64);
  auto wch = w.add("w", prompt_of(7, 10), seeded(2, 1, 50));
  w.engine->abort_request("w");
  w.engine->step();
  std::vector<RequestOutput> wgot = collect_all(*wch);
  ASSERT_EQ(wgot.size(), 2u);
  for (const RequestOutput& c : wgot) EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
  EXPECT_EQ(w.engine->stats().kv_blocks_used, 0);
}

TEST(ParallelSampling, BestOfReturnsTheNHighestCumulativeLogprobsAtTheEnd) {
  Harness h(64);
  std::vector<int32_t> p = prompt_of(8, 6);
  SamplingParams sp = seeded(2, 21, 5);
  sp.best_of = 5;
  auto ch = h.add("b", p, sp);
  std::vector<RequestOutput> deltas;
  while (h.engine->step())
    for (RequestOutput& d : ch->drain()) deltas.push_back(std::move(d));
  for (RequestOutput& d : ch->drain()) deltas.push_back(std::move(d));
  // Not streamed: one whole, finished delta per returned choice.
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);

  // The 5 candidates alone (seed 21 + i), ranked by their cumulative raw
  // logprob computed here from the reference model.
  std::vector<std::pair<double, std::vector<int32_t>>> cands;
  for (int i = 0; i < 5; ++i) {
    RequestOutput a = run_alone(p, sp, 21 + static_cast<uint64_t>(i));
    std::vector<int32_t> ctx = p;
    double cum = 0.0;
    for (int32_t t : a.token_ids) {
      std::vector<float> l = reference_logits(ctx, kVocab);
      double m = *std::max_element(l.begin(), l.end()), s = 0.0;
      for (float x : l) s += std::exp(static_cast<double>(x) - m);
      cum += static_cast<double>(l[static_cast<size_t>(t)]) - m - std::log(s);
      ctx.push_back(t);
    }
    cands.emplace_back(cum, a.token_ids);
  }
  std::stable_sort(cands.begin(), cands.end(), [](auto& a, auto& b) { return a.first > b.first; });
  ASSERT_NE(cands[1].first, cands[2].first);
  for (int r = 0; r < 2; ++r) {
    const RequestOutput& d = deltas[static_cast<size_t>(r)];
    EXPECT_TRUE(d.finished);
    EXPECT_EQ(d.index, r);
    EXPECT_EQ(d.token_ids, cands[static_cast<size_t>(r)].second) << r;
    EXPECT_NEAR(d.cumulative_logprob, cands[static_cast<size_t>(r)].first, 1e-4) << r;
    EXPECT_TRUE(d.logprobs.empty());  // logprobs were not asked for
  }
}

TEST(ParallelSampling, GroupsSurvivePreemptionAndStillMatchRunningAlone) {
  // 14 blocks of 4 tokens for 3 groups of 3 samples of up to 20 tokens.
  Harness h(14);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> prompts;
  for (int g = 0; g < 3; ++g) {
    prompts.push_back(prompt_of(40 + static_cast<uint64_t>(g), 5 + g * 3));
    chans.push_back(h.add(fmt::format("g{}", g), prompts.back(), seeded(3, 100 * static_cast<uint64_t>(g), 12)));
  }
  h.engine->run_until_idle();
  EXPECT_GT(h.engine->stats().num_preemptions_total, 0);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  for (int g = 0; g < 3; ++g) {
    std::vector<RequestOutput> got = collect_all(*chans[static_cast<size_t>(g)]);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      RequestOutput alone = run_alone(prompts[static_cast<size_t>(g)], seeded(1, 0, 12),
                                      100 * static_cast<uint64_t>(g) + static_cast<uint64_t>(i));
      EXPECT_EQ(got[static_cast<size_t>(i)].token_ids, alone.token_ids) << g << "/" << i;
    }
  }
}

TEST(ParallelSampling, LogprobsAreTheReferenceModelsRawLogSoftmax) {
  Harness h(64);
  std::vector<int32_t> p = prompt_of(9, 5);
  SamplingParams sp = seeded(2, 4, 6);
  sp.temperature = 0.8f;
  sp.repetition_penalty = 1.3f;  // must not show in the logprobs
  sp.logprobs = 3;
  auto ch = h.add("l", p, sp);
  h.engine->run_until_idle();
  for (const RequestOutput& c : collect_all(*ch)) {
    ASSERT_EQ(c.logprobs.size(), c.token_ids.size());
    std::vector<int32_t> ctx = p;
    double cum = 0.0;
    for (size_t k = 0; k < c.token_ids.size(); ++k) {
      std::vector<float> l = reference_logits(ctx, kVocab);
      double m = *std::max_element(l.begin(), l.end()), s = 0.0;
      for (float x : l) s += std::exp(static_cast<double>(x) - m);
      const double lse = m + std::log(s);
      const TokenLogprob& t = c.logprobs[k];
      EXPECT_EQ(t.token_id, c.token_ids[k]);
      EXPECT_NEAR(t.logprob, l[static_cast<size_t>(t.token_id)] - lse, 1e-5);
      ASSERT_EQ(t.top.size(), 3u);
      std::vector<float> sorted = l;
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_NEAR(t.top[j].second, sorted[j] - lse, 1e-5);
        EXPECT_EQ(l[static_cast<size_t>(t.top[j].first)], sorted[j]);
      }
      cum += l[static_cast<size_t>(t.token_id)] - lse;
      ctx.push_back(c.token_ids[k]);
    }
    EXPECT_NEAR(c.cumulative_logprob, cum, 1e-4);
  }
}

// A forward that throws on its first call (the engine thread then aborts
// every request, as for any failed step).
class FailsOnce final : public FakeExecutor {
 public:
  using FakeExecutor::FakeExecutor;
  void execute(const ForwardBatch& b, std::vector<float>& logits) override {
    if (!failed_) {
      failed_ = true;
      throw std::runtime_error("injected forward failure");
    }
    FakeExecutor::execute(b, logits);
  }

 private:
  bool failed_ = false;
};

TEST(ParallelSampling, BlocksRecordedByAFailedStepAreNotServedFromThePrefixCache) {
  // The scheduler records the prompt's full blocks when it schedules the
  // step that computes them (sample 1 takes them in that same step); the
  // forward throws, so they were never written. The same prompt afterwards
  // must compute them again: a hit would read slots never written (the
  // FakeExecutor throws, the request fails).
  Harness h(std::make_unique<FailsOnce>(kVocab, 64, 4));
  h.engine->start();
  const std::vector<int32_t> p = prompt_of(12, 13);  // 3 full blocks + 1 token
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.n = 2;
  sp.max_tokens = 6;
  for (const RequestOutput& c : collect_all(*h.add("failed", p, sp)))
    EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
  const std::vector<RequestOutput> again = collect_all(*h.add("again", p, sp));
  ASSERT_EQ(again.size(), 2u);
  const std::vector<int32_t> want = reference_greedy(p, 6, kVocab, {kEos});
  for (const RequestOutput& c : again) {
    EXPECT_EQ(c.error, "");
    EXPECT_EQ(c.token_ids, want);
  }
  h.engine->stop();
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

// Each sample takes one of max_num_seqs seats and is scheduled on its own
// (vLLM v1's child requests): a request with more samples than seats runs
// them in turn, the later ones as seats free up, each the same as the
// request alone with its seed (seed + index); best_of > max_num_seqs ranks
// them all when the last has finished.
TEST(ParallelSampling, MoreSamplesThanMaxNumSeqsRunInTurns) {
  EngineConfig cfg;
  cfg.max_num_seqs = 2;
  const std::vector<int32_t> p = prompt_of(12, 9);
  {
    Harness h(64, 4, cfg);
    auto ch = h.add("n3", p, seeded(3, 21, 5));
    ASSERT_TRUE(h.engine->step());
    EXPECT_EQ(h.engine->stats().num_running, 2);
    EXPECT_EQ(h.engine->stats().num_waiting, 1);
    h.engine->run_until_idle();
    const std::vector<RequestOutput> got = collect_all(*ch);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      const RequestOutput& c = got[static_cast<size_t>(i)];
      EXPECT_EQ(c.error, "");
      EXPECT_EQ(c.index, i);
      EXPECT_EQ(c.token_ids, run_alone(p, seeded(1, 0, 5), 21 + static_cast<uint64_t>(i)).token_ids)
          << "choice " << i;
    }
    EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  }
  {
    // Greedy: every choice is the reference's greedy output.
    Harness h(64, 4, cfg);
    SamplingParams sp;
    sp.temperature = 0.0f;
    sp.n = 3;
    sp.max_tokens = 8;
    auto ch = h.add("greedy", p, sp);
    h.engine->run_until_idle();
    const std::vector<RequestOutput> got = collect_all(*ch);
    ASSERT_EQ(got.size(), 3u);
    for (const RequestOutput& c : got)
      EXPECT_EQ(c.token_ids, reference_greedy(p, 8, kVocab, {kEos}));
  }
  {
    // best_of 5 > 2 seats, n 2: the two samples of highest cumulative
    // logprob among the five, best first.
    Harness h(64, 4, cfg);
    SamplingParams sp = seeded(2, 40, 5);
    sp.best_of = 5;
    auto ch = h.add("best", p, sp);
    h.engine->run_until_idle();
    const std::vector<RequestOutput> got = collect_all(*ch);
    std::vector<RequestOutput> alone;
    for (uint64_t i = 0; i < 5; ++i) {
      SamplingParams one = seeded(1, 0, 5);
      one.logprobs = 0;  // cumulative_logprob, as best_of ranks by it
      alone.push_back(run_alone(p, one, 40 + i));
    }
    std::stable_sort(alone.begin(), alone.end(),
                     [](const RequestOutput& a, const RequestOutput& b) {
                       return a.cumulative_logprob > b.cumulative_logprob;
                     });
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].token_ids, alone[0].token_ids);
    EXPECT_EQ(got[1].token_ids, alone[1].token_ids);
  }
}

TEST(ParallelSampling, BadNBestOfLogprobsAndBiasAreRejected) {
  EngineConfig cfg;
  cfg.max_num_seqs = 4;
  Harness h(64, 4, cfg);
  auto bad = [&](SamplingParams sp, const std::string& what) {
    auto ch = h.add("bad", prompt_of(1, 4), sp);
    RequestOutput r = collect(*ch);
    EXPECT_NE(r.error.find(what), std::string::npos) << r.error;
    EXPECT_TRUE(ch->finished());
  };
  SamplingParams sp;
  sp.n = 0;
  bad(sp, "n must be");
  sp.n = 3;
  sp.best_of = 2;
  bad(sp, "best_of must be >= n");
  SamplingParams lp;
  lp.logprobs = 21;
  bad(lp, "logprobs");
  SamplingParams lb;
  lb.logit_bias = {{40, 1.0f}};
  bad(lb, "logit_bias");
  lb.logit_bias = {{3, 101.0f}};
  bad(lb, "logit_bias");
  SamplingParams mt;
  mt.max_tokens = 3;
  mt.min_tokens = 4;
  bad(mt, "min_tokens");
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

// Metrics count a request once however many sequences it runs: one TTFT
// and one end-to-end observation, its prompt once; every sequence's tokens
// after its first are inter-token gaps, and all of them are generation
// tokens.
TEST(ParallelSampling, LatencyHistogramsAndTokenCountersCountTheRequestOnce) {
  Harness h(256);
  struct Case {
    int n;
    int best_of;
  };
  for (Case c : {Case{3, 3}, Case{2, 4}, Case{1, 1}}) {
    SCOPED_TRACE(fmt::format("n={} best_of={}", c.n, c.best_of));
    const EngineStats before = h.engine->stats();
    SamplingParams sp = seeded(c.n, 11, 6);
    sp.best_of = c.best_of;
    auto ch = h.add(fmt::format("m{}_{}", c.n, c.best_of), prompt_of(9, 7), sp);
    h.engine->run_until_idle();
    RequestOutput r = collect(*ch);
    ASSERT_TRUE(r.error.empty()) << r.error;
    const EngineStats after = h.engine->stats();
    EXPECT_EQ(after.time_to_first_token.count - before.time_to_first_token.count, 1);
    EXPECT_EQ(after.e2e_request_latency.count - before.e2e_request_latency.count, 1);
    EXPECT_EQ(after.inter_token_latency.count - before.inter_token_latency.count, c.best_of * (6 - 1));
    EXPECT_EQ(after.prompt_tokens_total - before.prompt_tokens_total, 7);
    EXPECT_EQ(after.generation_tokens_total - before.generation_tokens_total, c.best_of * 6);
  }
}

}  // namespace
}  // namespace pagoda
