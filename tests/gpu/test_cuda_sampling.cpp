// GpuSampler (gpu/gpu_sampler.h) against the host Sampler, the reference:
//  * greedy rows with every combination of repetition/frequency/presence
//    penalties, logit_bias, min_tokens bans, bad-word bans and
//    allowed_token_ids pick exactly the host's id, also over 12 steps in
//    which the device keeps the penalty counts itself;
//  * logprobs (the sampled token's and the top 20) within 1e-3 of the host's,
//    same ids;
//  * prompt-logprob score rows mixed with sampling rows: the token's
//    logprob within 1e-3 of score_prompt_token's, the same rank (ties
//    included) and top ids, and the sampling rows unchanged;
//  * seeded sampling with temperature, top_k, top_p, min_p (and penalties)
//    draws the host's distribution (two-sample chi-square against the host
//    Sampler's draws, never a token the host excludes), the same seeds the
//    same ids; large-vocabulary top_p/top_k rows too.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "engine/sample/bad_words.h"
#include "engine/sample/device_rows.h"
#include "engine/sample/prompt_logprobs.h"
#include "engine/sample/sampler.h"
#include "gpu/gpu_sampler.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using gputest::fresh_seed;

// One row's settings and history, run through both samplers.
struct RowCase {
  SamplingParams sp;
  std::vector<int32_t> prompt, output;
};

// Appends c's device row as the ModelRunner builds it (device_rows.h); with
// a penalty, slot `slot`, (re)built from c's history when init.
void add_row(DeviceSamplingBatch& b, const RowCase& c, int32_t src, int32_t slot, bool init,
             const std::vector<int32_t>& eos, uint64_t seed) {
  DeviceSampleRow& r = append_sample_row(b, c.sp, c.output, eos, src, seed);
  if (!needs_penalty_slot(c.sp)) return;
  r.slot = slot;
  b.num_slots = std::max(b.num_slots, slot + 1);
  if (init) append_slot_init(b, slot, c.prompt, c.output);
}

TokenLogprob host_sample(std::span<const float> row, const RowCase& c,
                         const std::vector<int32_t>& eos, std::mt19937_64* rng) {
  std::vector<float> scratch(row.begin(), row.end());
  std::vector<int32_t> bans;
  append_sampling_bans(c.sp, c.output, eos, bans);
  SampleInput in{&c.sp, c.prompt, c.output, bans, rng};
  return Sampler::sample_with_logprobs(scratch, in);
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return v;
}

// Every combination of the greedy-affecting features, one row each.
std::vector<RowCase> greedy_cases(std::mt19937_64& rng, int64_t vocab, int64_t rows) {
  std::vector<RowCase> cases;
  for (int64_t r = 0; r < rows; ++r) {
    RowCase c;
    c.sp.temperature = 0.f;
    const int bits = static_cast<int>(r % 64);
    c.prompt = random_ids(rng, 1 + rng() % 40, vocab);
    c.output = random_ids(rng, rng() % 30, vocab);
    // Repeat some output ids so frequency counts exceed 1.
    for (size_t k = 1; k < c.output.size(); k += 3) c.output[k] = c.output[k - 1];
    if (bits & 1) c.sp.repetition_penalty = (r % 3 == 0) ? 1.3f : 0.7f;
    if (bits & 2) c.sp.frequency_penalty = (r % 2) ? 0.8f : -0.5f;
    if (bits & 4) c.sp.presence_penalty = (r % 2) ? -1.1f : 1.5f;
    if (bits & 8)
      for (int k = 0; k < 5; ++k)
        c.sp.logit_bias.emplace_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)),
                                     static_cast<float>(static_cast<int>(rng() % 200) - 100) / 7.f);
    if (bits & 16) {
      c.sp.min_tokens = static_cast<int64_t>(c.output.size()) + 1;
      c.sp.stop_token_ids = {static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab))};
    }
    if (bits & 32) {
      c.sp.allowed_token_ids = random_ids(rng, 50, vocab);
      if (!c.output.empty())
        c.sp.bad_words_token_ids = {{c.output.back(), c.sp.allowed_token_ids[0]},
                                    {c.sp.allowed_token_ids[1]}};
    }
    cases.push_back(c);
  }
  return cases;
}

TEST(CudaSampling, GreedyWithEveryPenaltyBiasAndBanEqualsHostExactly) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const std::vector<int32_t> eos = {2};
  for (const int64_t vocab : {int64_t{512}, int64_t{32000}, int64_t{151936}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t rows = 128;
    std::vector<float> host =
        gputest::random_vec(rng, static_cast<size_t>(rows * vocab), DType::F32, -6.f, 6.f);
    // Ties for the maximum in some rows: the lowest id must win.
    for (int64_t r = 0; r < rows; r += 5) {
      host[static_cast<size_t>(r * vocab + static_cast<int64_t>(rng() % vocab))] = 7.f;
      host[static_cast<size_t>(r * vocab + static_cast<int64_t>(rng() % vocab))] = 7.f;
    }
    Tensor logits = gputest::upload(*backend, DType::F32, {rows, vocab}, host);
    cuda::GpuSampler sampler(*backend, vocab);
    std::vector<RowCase> cases = greedy_cases(rng, vocab, rows);
    // 12 steps: the device updates its own penalty counts after step 0.
    for (int step = 0; step < 12; ++step) {
      DeviceSamplingBatch b;
      for (int64_t r = 0; r < rows; ++r)
        add_row(b, cases[static_cast<size_t>(r)], static_cast<int32_t>(r), static_cast<int32_t>(r),
                step == 0, eos, rng());
      std::vector<TokenLogprob> got;
      sampler.sample(logits, b, got);
      ASSERT_EQ(got.size(), static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        RowCase& c = cases[static_cast<size_t>(r)];
        const std::span<const float> row(host.data() + r * vocab, static_cast<size_t>(vocab));
        const TokenLogprob want = host_sample(row, c, eos, nullptr);
        ASSERT_EQ(got[static_cast<size_t>(r)].token_id, want.token_id)
            << "step " << step << " row " << r << " case bits " << (r % 64);
        c.output.push_back(want.token_id);
      }
    }
    backend->free(logits);
  }
}

TEST(CudaSampling, LogprobsMatchHostWithinTolerance) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const int64_t rows = 48, vocab = 32000;
  std::vector<float> host =
      gputest::random_vec(rng, static_cast<size_t>(rows * vocab), DType::F32, -10.f, 10.f);
  // A few exact ties among the top values.
  for (int64_t r = 0; r < rows; r += 3)
    for (int k = 0; k < 3; ++k)
      host[static_cast<size_t>(r * vocab + static_cast<int64_t>(rng() % vocab))] = 11.f;
  Tensor logits = gputest::upload(*backend, DType::F32, {rows, vocab}, host);
  cuda::GpuSampler sampler(*backend, vocab);
  DeviceSamplingBatch b;
  std::vector<RowCase> cases;
  for (int64_t r = 0; r < rows; ++r) {
    RowCase c;
    c.sp.temperature = 0.f;
    c.sp.logprobs = static_cast<int>(r % 21);        // 0..20
    if (r % 4 == 1) c.sp.repetition_penalty = 1.2f;  // logprobs stay raw
    c.prompt = random_ids(rng, 10, vocab);
    cases.push_back(c);
    add_row(b, c, static_cast<int32_t>(r), static_cast<int32_t>(r), true, {}, 0);
  }
  std::vector<TokenLogprob> got;
  sampler.sample(logits, b, got);
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(host.data() + r * vocab, static_cast<size_t>(vocab));
    const TokenLogprob want = host_sample(row, cases[static_cast<size_t>(r)], {}, nullptr);
    const TokenLogprob& g = got[static_cast<size_t>(r)];
    EXPECT_EQ(g.token_id, want.token_id) << "row " << r;
    EXPECT_NEAR(g.logprob, want.logprob, 1e-3) << "row " << r;
    ASSERT_EQ(g.top.size(), want.top.size()) << "row " << r;
    for (size_t k = 0; k < want.top.size(); ++k) {
      EXPECT_EQ(g.top[k].first, want.top[k].first) << "row " << r << " rank " << k;
      EXPECT_NEAR(g.top[k].second, want.top[k].second, 1e-3) << "row " << r << " rank " << k;
    }
  }
  backend->free(logits);
}

TEST(CudaSampling, ScoreRowsMatchTheHostsPromptLogprobsBesideSamplingRows) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const int64_t rows = 40, vocab = 32000;
  std::vector<float> host =
      gputest::random_vec(rng, static_cast<size_t>(rows * vocab), DType::F32, -10.f, 10.f);
  std::vector<int32_t> tied(static_cast<size_t>(rows));  // an id sharing the row's top logit
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < 3; ++k) {
      tied[static_cast<size_t>(r)] = static_cast<int32_t>(rng() % vocab);
      host[static_cast<size_t>(r * vocab + tied[static_cast<size_t>(r)])] = 11.f;
    }
  Tensor logits = gputest::upload(*backend, DType::F32, {rows, vocab}, host);
  cuda::GpuSampler sampler(*backend, vocab);
  // Rows 0..9 sample (penalised ones use slots and the scratch row); then
  // a score row for each of the 40 logits rows (0..9 read by both).
  DeviceSamplingBatch b;
  std::vector<RowCase> cases;
  for (int64_t r = 0; r < 10; ++r) {
    RowCase c;
    c.sp.temperature = 0.f;
    c.sp.logprobs = static_cast<int>(r % 3);
    if (r % 2 == 1) c.sp.repetition_penalty = 1.3f;
    c.prompt = random_ids(rng, 10, vocab);
    cases.push_back(c);
    add_row(b, c, static_cast<int32_t>(r), static_cast<int32_t>(r), true, {}, 0);
  }
  std::vector<int32_t> token(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    token[static_cast<size_t>(r)] = r % 4 == 0   ? tied[static_cast<size_t>(r)]
                                    : r % 4 == 1 ? static_cast<int32_t>(vocab - 1)
                                                 : static_cast<int32_t>(rng() % vocab);
    DeviceSampleRow d;
    d.src_row = static_cast<int32_t>(r);
    d.score_token = token[static_cast<size_t>(r)];
    d.logprobs = static_cast<int32_t>(r % 21);
    b.rows.push_back(d);
  }
  std::vector<TokenLogprob> got;
  sampler.sample(logits, b, got);
  ASSERT_EQ(got.size(), b.rows.size());
  for (int64_t r = 0; r < 10; ++r) {
    const std::span<const float> row(host.data() + r * vocab, static_cast<size_t>(vocab));
    const TokenLogprob want = host_sample(row, cases[static_cast<size_t>(r)], {}, nullptr);
    EXPECT_EQ(got[static_cast<size_t>(r)].token_id, want.token_id) << "sampling row " << r;
    // logprobs 0..2 on every sampling row: the sampled id's rank, as the host's
    EXPECT_GE(want.rank, 1);
    EXPECT_EQ(got[static_cast<size_t>(r)].rank, want.rank) << "sampling row " << r;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(host.data() + r * vocab, static_cast<size_t>(vocab));
    const PromptLogprob want =
        score_prompt_token(row, token[static_cast<size_t>(r)], static_cast<int>(r % 21));
    const TokenLogprob& g = got[static_cast<size_t>(10 + r)];
    EXPECT_EQ(g.token_id, want.token_id) << "score row " << r;
    EXPECT_NEAR(g.logprob, want.logprob, 1e-3) << "score row " << r;
    EXPECT_EQ(g.rank, want.rank) << "score row " << r;
    ASSERT_EQ(g.top.size(), want.top.size()) << "score row " << r;
    for (size_t k = 0; k < want.top.size(); ++k) {
      EXPECT_EQ(g.top[k].first, want.top[k].first) << "score row " << r << " rank " << k;
      EXPECT_NEAR(g.top[k].second, want.top[k].second, 1e-3) << "score row " << r;
    }
  }
  backend->free(logits);
}

struct Case {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  float repetition_penalty;
};

// Two-sample chi-square over the tokens either side drew (equal n), at the
// 99.9th percentile; a token the host never draws must never be drawn.
void expect_same_distribution(const std::vector<int64_t>& gcount,
                              const std::vector<int64_t>& ccount) {
  double chi2 = 0.0;
  int df = -1;
  for (size_t v = 0; v < gcount.size(); ++v) {
    const double a = static_cast<double>(gcount[v]), b = static_cast<double>(ccount[v]);
    if (b == 0) EXPECT_EQ(a, 0.0) << "GPU drew token " << v << " that the host sampler excludes";
    if (a + b == 0) continue;
    chi2 += (a - b) * (a - b) / (a + b);
    ++df;
  }
  ASSERT_GE(df, 1);
  ASSERT_LE(df, 11);
  const double crit[] = {0,     10.83, 13.82, 16.27, 18.47, 20.52,
                         22.46, 24.32, 26.12, 27.88, 29.59, 31.26};
  EXPECT_LT(chi2, crit[df]) << "df " << df;
}

TEST(CudaSampling, SeededSamplingMatchesHostDistributionAndReproduces) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const int64_t vocab = 12, n = 40000;
  cuda::GpuSampler sampler(*backend, vocab);
  const std::vector<float> row = {1.0f, 0.5f,  2.0f, -1.0f, 1.5f,  0.0f,
                                  2.2f, -3.0f, 0.8f, 1.2f,  -0.5f, 0.3f};
  const std::vector<Case> cases = {{1.0f, 0, 1.0f, 0.f, 1.f},  {0.7f, 5, 1.0f, 0.f, 1.f},
                                   {1.3f, 0, 0.8f, 0.f, 1.f},  {0.9f, 8, 0.9f, 0.f, 1.f},
                                   {1.0f, 0, 1.0f, 0.2f, 1.f}, {0.7f, 6, 0.8f, 0.f, 1.3f},
                                   {1.0f, 0, 0.5f, 0.f, 1.f}};
  std::vector<float> host;
  for (int64_t i = 0; i < n; ++i) host.insert(host.end(), row.begin(), row.end());
  Tensor logits = gputest::upload(*backend, DType::F32, {n, vocab}, host);
  for (const Case& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.temperature) + " top_k " + std::to_string(c.top_k) +
                 " top_p " + std::to_string(c.top_p) + " min_p " + std::to_string(c.min_p) +
                 " rep " + std::to_string(c.repetition_penalty));
    RowCase rc;
    rc.sp.temperature = c.temperature;
    rc.sp.top_k = c.top_k;
    rc.sp.top_p = c.top_p;
    rc.sp.min_p = c.min_p;
    rc.sp.repetition_penalty = c.repetition_penalty;
    rc.prompt = {2, 6, 6};  // the two most likely ids are penalised
    DeviceSamplingBatch b;
    std::vector<uint64_t> seeds;
    for (int64_t i = 0; i < n; ++i) {
      seeds.push_back(rng());
      // One slot for all rows: they only read it (the history never grows
      // here, and every row adds its id after sampling: re-init each call).
      add_row(b, rc, static_cast<int32_t>(i), static_cast<int32_t>(i), true, {}, seeds.back());
    }
    std::vector<TokenLogprob> g1, g2;
    sampler.sample(logits, b, g1);
    sampler.sample(logits, b, g2);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(g1[static_cast<size_t>(i)].token_id, g2[static_cast<size_t>(i)].token_id)
          << "same seed, row " << i;
    std::mt19937_64 cpu_rng(rng());
    std::vector<int64_t> gcount(static_cast<size_t>(vocab)), ccount(static_cast<size_t>(vocab));
    std::set<int32_t> distinct;
    for (int64_t i = 0; i < n; ++i) {
      ccount[static_cast<size_t>(host_sample(row, rc, {}, &cpu_rng).token_id)]++;
      const int32_t g = g1[static_cast<size_t>(i)].token_id;
      ASSERT_TRUE(g >= 0 && g < vocab);
      gcount[static_cast<size_t>(g)]++;
      distinct.insert(g);
    }
    expect_same_distribution(gcount, ccount);
    EXPECT_GT(distinct.size(), 1u);
  }
  backend->free(logits);
}

// Large vocabularies take other paths (radix select, gathered candidates,
// the top_p search beyond 1024 candidates): the kept set must be the host's.
TEST(CudaSampling, LargeVocabularyDrawsOnlyWhatTheHostKeeps) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const int64_t vocab = 151936, rows = 64;
  cuda::GpuSampler sampler(*backend, vocab);
  for (const Case& c : std::vector<Case>{{0.7f, 20, 0.8f, 0.f, 1.05f},
                                         {1.0f, 0, 0.9f, 0.f, 1.f},
                                         {1.0f, 0, 0.999f, 0.f, 1.f},
                                         {0.8f, 50, 1.f, 0.05f, 1.f},
                                         {1.0f, 2000, 0.95f, 0.f, 1.f}}) {
    SCOPED_TRACE("T " + std::to_string(c.temperature) + " top_k " + std::to_string(c.top_k) +
                 " top_p " + std::to_string(c.top_p));
    // Peaked (a model's), and flat rows alternately.
    std::vector<float> host(static_cast<size_t>(rows * vocab));
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < vocab; ++i)
        host[static_cast<size_t>(r * vocab + i)] = nd(rng) * (r % 2 ? 0.3f : 3.0f);
    Tensor logits = gputest::upload(*backend, DType::F32, {rows, vocab}, host);
    RowCase rc;
    rc.sp.temperature = c.temperature;
    rc.sp.top_k = c.top_k;
    rc.sp.top_p = c.top_p;
    rc.sp.min_p = c.min_p;
    rc.sp.repetition_penalty = c.repetition_penalty;
    rc.prompt = random_ids(rng, 64, vocab);
    for (int rep = 0; rep < 2; ++rep) {
      DeviceSamplingBatch b;
      for (int64_t r = 0; r < rows; ++r)
        add_row(b, rc, static_cast<int32_t>(r), static_cast<int32_t>(r), true, {}, rng());
      std::vector<TokenLogprob> got;
      sampler.sample(logits, b, got);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> scratch(host.begin() + r * vocab, host.begin() + (r + 1) * vocab);
        SampleInput in{&rc.sp, rc.prompt, {}, {}, nullptr};
        const std::vector<double> p = Sampler::probabilities(scratch, in);
        const int32_t g = got[static_cast<size_t>(r)].token_id;
        ASSERT_TRUE(g >= 0 && g < vocab);
        // The host keeps it (allowing for the boundary token of top_p,
        // whose kept mass may round the other way).
        EXPECT_GT(p[static_cast<size_t>(g)], 0.0)
            << "row " << r << " drew " << g << " the host excludes";
      }
    }
    backend->free(logits);
  }
}

TEST(CudaSampling, RejectsBadParameters) {
  PAGODA_REQUIRE_GPU();
  auto backend = make_cuda_backend(0, DType::F32);
  cuda::GpuSampler sampler(*backend, 16);
  Tensor logits = backend->alloc(DType::F32, {2, 16});
  backend->fill_zero(logits);
  std::vector<TokenLogprob> out;
  DeviceSamplingBatch b;
  b.rows.resize(2);
  b.rows[1].src_row = 1;
  b.rows[1].top_p = 0.f;
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].top_p = 1.f;
  b.rows[0].temperature = -1.f;
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[0].temperature = 0.f;
  b.rows[1].src_row = 2;  // past the logits rows
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].src_row = 1;
  b.rows[1].slot = 0;  // num_slots is 0
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].slot = -1;
  b.rows[1].ban_count = 3;  // no ids
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].ban_count = 0;
  b.rows[1].score_token = 16;  // outside the vocabulary
  b.rows[1].logprobs = 0;
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].score_token = 3;
  b.rows[1].logprobs = -1;  // a score row reports a logprob
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].logprobs = 0;
  b.rows[1].temperature = 0.5f;
  b.num_slots = 1;
  b.rows[1].slot = 0;  // a score row draws nothing, counts nothing
  EXPECT_THROW(sampler.sample(logits, b, out), std::invalid_argument);
  b.rows[1].slot = -1;
  sampler.sample(logits, b, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].token_id, 3);
  EXPECT_EQ(out[1].rank, 16);  // all 16 logits equal its own
  EXPECT_NEAR(out[1].logprob, -std::log(16.f), 1e-5);
  b.rows[1] = DeviceSampleRow{};
  b.rows[1].src_row = 1;
  sampler.sample(logits, b, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].token_id, 0);  // all-equal row: lowest id
  EXPECT_EQ(out[1].token_id, 0);
  backend->free(logits);
}

}  // namespace
}  // namespace pagoda
