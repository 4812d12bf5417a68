// GpuSampler (gpu/gpu_sampler.h) against the CPU Sampler: greedy picks the
// same ids (ties to the lowest id); seeded sampling with temperature, top_k,
// top_p and min_p follows the same distribution (two-sample chi-square
// against the CPU Sampler's draws, never a token the CPU excludes) and the
// same seeds give the same ids. Skipped without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/sample/sampler.h"
#include "gpu/gpu_sampler.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using gputest::fresh_seed;

TEST(CudaSampling, GreedyEqualsCpuArgmaxWithTies) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  const int64_t rows = 64, vocab = 32000;
  std::vector<float> host = gputest::random_vec(rng, static_cast<size_t>(rows * vocab), DType::F32, -8.f, 8.f);
  // Plant ties for the maximum in half of the rows: the lowest id must win.
  for (int64_t r = 0; r < rows; r += 2) {
    const int64_t a = static_cast<int64_t>(rng() % vocab), b = static_cast<int64_t>(rng() % vocab);
    host[static_cast<size_t>(r * vocab + a)] = 9.f;
    host[static_cast<size_t>(r * vocab + b)] = 9.f;
  }
  Tensor logits = gputest::upload(*backend, DType::F32, {rows, vocab}, host);
  cuda::GpuSampler sampler(*backend);
  std::vector<cuda::GpuSampleParams> params(static_cast<size_t>(rows));
  for (auto& p : params) p.seed = rng();  // ignored when greedy
  std::vector<int32_t> ids;
  sampler.sample(logits, params, ids);
  ASSERT_EQ(ids.size(), static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    std::span<const float> row(host.data() + r * vocab, static_cast<size_t>(vocab));
    EXPECT_EQ(ids[static_cast<size_t>(r)], Sampler::argmax(row)) << "row " << r;
  }
  backend->free(logits);
}

struct Case {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

TEST(CudaSampling, SeededSamplingMatchesCpuDistributionAndReproduces) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, DType::F32);
  cuda::GpuSampler sampler(*backend);
  const int64_t vocab = 12, n = 40000;
  const std::vector<float> row = {1.0f, 0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 2.2f, -3.0f, 0.8f, 1.2f, -0.5f, 0.3f};
  const std::vector<Case> cases = {{1.0f, 0, 1.0f, 0.f}, {0.7f, 5, 1.0f, 0.f}, {1.3f, 0, 0.8f, 0.f},
                                   {0.9f, 8, 0.9f, 0.f}, {1.0f, 0, 1.0f, 0.2f}};
  std::vector<float> host;
  for (int64_t i = 0; i < n; ++i) host.insert(host.end(), row.begin(), row.end());
  Tensor logits = gputest::upload(*backend, DType::F32, {n, vocab}, host);
  for (const Case& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.temperature) + " top_k " + std::to_string(c.top_k) + " top_p " +
                 std::to_string(c.top_p) + " min_p " + std::to_string(c.min_p));
    std::vector<cuda::GpuSampleParams> params(static_cast<size_t>(n));
    for (auto& p : params) p = {c.temperature, c.top_k, c.top_p, c.min_p, rng()};
    std::vector<int32_t> gpu_ids, again;
    sampler.sample(logits, params, gpu_ids);
    sampler.sample(logits, params, again);
    EXPECT_EQ(gpu_ids, again) << "same seeds, different ids";

    SamplingParams sp;
    sp.temperature = c.temperature;
    sp.top_k = c.top_k;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    std::mt19937_64 cpu_rng(rng());
    std::vector<int64_t> gcount(static_cast<size_t>(vocab)), ccount(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> scratch = row;
      SampleInput in{&sp, {}, {}, {}, &cpu_rng};
      ccount[static_cast<size_t>(Sampler::sample(scratch, in))]++;
      const int32_t g = gpu_ids[static_cast<size_t>(i)];
      ASSERT_TRUE(g >= 0 && g < vocab);
      gcount[static_cast<size_t>(g)]++;
    }
    // Two-sample chi-square over the tokens either side drew (equal n).
    double chi2 = 0.0;
    int df = -1;
    for (int64_t v = 0; v < vocab; ++v) {
      const double a = static_cast<double>(gcount[static_cast<size_t>(v)]);
      const double b = static_cast<double>(ccount[static_cast<size_t>(v)]);
      if (b == 0) EXPECT_EQ(a, 0.0) << "GPU drew token " << v << " that the CPU sampler excludes";
      if (a + b == 0) continue;
      chi2 += (a - b) * (a - b) / (a + b);
      ++df;
    }
    ASSERT_GE(df, 1);
    // 99.9th percentile of chi-square for df 1..11.
    const double crit[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26};
    EXPECT_LT(chi2, crit[df]) << "df " << df;
    // Different seeds draw different tokens (the distribution is not a point mass).
    std::set<int32_t> distinct(gpu_ids.begin(), gpu_ids.end());
    EXPECT_GT(distinct.size(), 1u);
  }
  backend->free(logits);
}

TEST(CudaSampling, RejectsBadParameters) {
  PAGODA_REQUIRE_GPU();
  auto backend = make_cuda_backend(0, DType::F32);
  cuda::GpuSampler sampler(*backend);
  Tensor logits = backend->alloc(DType::F32, {2, 16});
  backend->fill_zero(logits);
  std::vector<int32_t> ids;
  std::vector<cuda::GpuSampleParams> p(2);
  p[1].top_p = 0.f;
  EXPECT_THROW(sampler.sample(logits, p, ids), std::invalid_argument);
  p[1].top_p = 1.f;
  p[0].temperature = -1.f;
  EXPECT_THROW(sampler.sample(logits, p, ids), std::invalid_argument);
  p.resize(3);
  p[0].temperature = 0.f;
  EXPECT_THROW(sampler.sample(logits, p, ids), std::invalid_argument);  // more rows than logits
  p.resize(2);
  sampler.sample(logits, p, ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 0}));  // all-equal row: lowest id
  backend->free(logits);
}

}  // namespace
}  // namespace pagoda
