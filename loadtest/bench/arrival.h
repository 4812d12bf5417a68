// When each request is sent: vLLM's get_request schedule. With a finite
// request rate the gaps between consecutive requests are drawn from a Gamma
// distribution of shape `burstiness` and scale 1 / (rate * burstiness)
// (mean 1 / rate): burstiness 1 is the exponential distribution, a Poisson
// process; below 1 burstier, above 1 more regular. An infinite rate sends
// everything at once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pagoda::bench {

// The send time of each of n requests, seconds from the benchmark's start:
// request 0 at 0, request i at the sum of the first i gaps (so the
// schedule does not drift with the client's own delays). rate: requests/s,
// > 0 (infinity: every time 0). burstiness > 0. Draws from
// std::mt19937_64(seed). Throws std::invalid_argument for rate <= 0,
// burstiness <= 0 (or not finite), or a schedule whose last send time is
// past kMaxScheduleS (a rate so low, 1e-12 req/s, that the times would not
// fit the clock: rejected rather than sent at once).
inline constexpr double kMaxScheduleS = 1e9;  // about 31 years
std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed);

}  // namespace pagoda::bench
