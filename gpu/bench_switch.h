// Benchmark switches: environment variables that choose between kernels or
// launch forms of equal results, so one build can time them against each
// other (PAGODA_PDL, PAGODA_INT4_DECODE, PAGODA_INT4_LAYOUT,
// PAGODA_QMMA_ROW_TILES, PAGODA_QMV_WARPS, PAGODA_PREFILL_WIDE,
// PAGODA_SKINNY, PAGODA_SMALL_M_RULE, PAGODA_DECODE_PART;
// docs/PERFORMANCE.md names each where it was measured). Read once by each call site (a
// function-local static). Internal to gpu/.
#pragma once
#include <cstdlib>
#include <string>

namespace pagoda::cuda {

// The value of environment variable `name`, or "" when it is unset.
inline std::string bench_switch(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace pagoda::cuda
