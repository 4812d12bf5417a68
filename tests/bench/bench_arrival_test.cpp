// The arrival schedule (loadtest/bench/arrival.h): goodness of fit of the
// inter-arrival times to the distribution vLLM draws them from, by the
// one-sample Kolmogorov–Smirnov statistic at fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "loadtest/bench/arrival.h"

namespace pagoda::bench {
namespace {

std::vector<double> gaps(const std::vector<double>& times) {
  std::vector<double> g;
  for (size_t i = 1; i < times.size(); ++i) g.push_back(times[i] - times[i - 1]);
  return g;
}

// sup |F_n(x) − F(x)| over the sample.
double ks_statistic(std::vector<double> x, const std::function<double(double)>& cdf) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, (static_cast<double>(i) + 1) / n - f, f - static_cast<double>(i) / n});
  }
  return d;
}

// The KS test's critical value at significance 0.01 for n samples
// (asymptotic: 1.628 / sqrt(n)). A correct sampler fails it 1 % of the
// time over seeds; the seeds here are fixed, so the test is deterministic.
double ks_critical_001(size_t n) { return 1.628 / std::sqrt(static_cast<double>(n)); }

TEST(BenchArrival, InfiniteRateSendsEverythingAtOnce) {
  auto t = arrival_times(5, std::numeric_limits<double>::infinity(), 1.0, 0);
  EXPECT_EQ(t, std::vector<double>(5, 0.0));
}

TEST(BenchArrival, PoissonGapsAreExponential) {
  const double rate = 10.0;
  for (uint64_t seed : {0u, 1u, 42u}) {
    const auto t = arrival_times(2001, rate, 1.0, seed);
    EXPECT_EQ(t[0], 0.0);
    EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
    const auto g = gaps(t);
    const double d = ks_statistic(g, [&](double x) { return 1 - std::exp(-rate * x); });
    EXPECT_LT(d, ks_critical_001(g.size())) << "seed " << seed;
    // Mean 1 / rate: the sample mean's standard error is 0.1 / sqrt(2000) ≈ 0.0022.
    EXPECT_NEAR(t.back() / 2000.0, 0.1, 0.01) << "seed " << seed;
    // And not some other distribution with that mean: a uniform one on
    // [0, 0.2] fails the same test.
    const double d_uniform = ks_statistic(g, [](double x) { return std::min(1.0, x / 0.2); });
    EXPECT_GT(d_uniform, ks_critical_001(g.size())) << "seed " << seed;
  }
}

TEST(BenchArrival, BurstinessGivesGammaGapsWithTheSameMean) {
  // Shape 4 (integer: the Erlang CDF), scale 1 / (rate · 4).
  const double rate = 4.0, k = 4.0, lambda = rate * k;
  const auto g = gaps(arrival_times(3001, rate, k, 7));
  const double d = ks_statistic(g, [&](double x) {
    double term = 1, sum = 1;
    for (int i = 1; i < 4; ++i) sum += term *= lambda * x / i;
    return 1 - std::exp(-lambda * x) * sum;
  });
  EXPECT_LT(d, ks_critical_001(g.size()));
  // Squared coefficient of variation = 1 / shape: 0.25 here, 2 at shape 0.5.
  auto cv2 = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return s / static_cast<double>(v.size()) / (m * m);
  };
  EXPECT_NEAR(cv2(g), 0.25, 0.05);
  const auto bursty = gaps(arrival_times(3001, rate, 0.5, 7));
  EXPECT_NEAR(cv2(bursty), 2.0, 0.4);
  double mean = 0;
  for (double x : bursty) mean += x;
  EXPECT_NEAR(mean / 3000.0, 0.25, 0.03);
}

TEST(BenchArrival, SameSeedSameSchedule) {
  EXPECT_EQ(arrival_times(50, 3.0, 1.0, 5), arrival_times(50, 3.0, 1.0, 5));
  EXPECT_NE(arrival_times(50, 3.0, 1.0, 5), arrival_times(50, 3.0, 1.0, 6));
}

TEST(BenchArrival, RejectsBadRates) {
  EXPECT_THROW(arrival_times(3, 0.0, 1.0, 0), std::invalid_argument);
  EXPECT_THROW(arrival_times(3, -1.0, 1.0, 0), std::invalid_argument);
  EXPECT_THROW(arrival_times(3, 1.0, 0.0, 0), std::invalid_argument);
  EXPECT_THROW(arrival_times(3, std::nan(""), 1.0, 0), std::invalid_argument);
}

// So low a rate that the send times do not fit the clock (the runner's
// duration_cast overflowed and sent everything at once): rejected.
TEST(BenchArrival, RejectsRatesTooLowForTheClock) {
  EXPECT_THROW(arrival_times(2, 1e-12, 1.0, 0), std::invalid_argument);
  EXPECT_THROW(arrival_times(2, 1e-15, 1.0, 7), std::invalid_argument);
  EXPECT_NO_THROW(arrival_times(1, 1e-12, 1.0, 0));  // one request: sent at 0
  const std::vector<double> slow = arrival_times(3, 1e-5, 1.0, 0);
  EXPECT_LE(slow.back(), kMaxScheduleS);
  EXPECT_GT(slow.back(), 0.0);
}

}  // namespace
}  // namespace pagoda::bench
