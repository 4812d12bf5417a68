#include "loadtest/bench/arrival.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <stdexcept>

namespace pagoda::bench {

std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed) {
  if (!(rate > 0))
    throw std::invalid_argument(fmt::format("--request-rate must be > 0, got {}", rate));
  if (!(burstiness > 0) || !std::isfinite(burstiness))
    throw std::invalid_argument(fmt::format("--burstiness must be > 0, got {}", burstiness));
  std::vector<double> out(n, 0.0);
  if (std::isinf(rate)) return out;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0.0;
  for (size_t i = 1; i < n; ++i) {
    t += gap(rng);
    if (!(t <= kMaxScheduleS))
      throw std::invalid_argument(fmt::format(
          "--request-rate {} is too low: request {} would be sent {:.3g} s after the start "
          "(the schedule may span at most {:.0e} s)",
          rate, i + 1, t, kMaxScheduleS));
    out[i] = t;
  }
  return out;
}

}  // namespace pagoda::bench
