// Runs the benchmark on one client thread (one io_context, as vLLM's
// asyncio loop): request i starts at its arrival time (arrival.h), each on
// its own connection, at most max_concurrency at once (later ones wait in
// arrival order), every result kept in dataset order.
#pragma once
#include <cstdint>
#include <vector>

#include "loadtest/bench/backends.h"
#include "loadtest/bench/dataset.h"
#include "loadtest/bench/metrics.h"

namespace pagoda::bench {

struct RunConfig {
  Backend backend = Backend::kOpenAI;
  Endpoint endpoint;
  RequestOptions options;
  double request_rate = 0;  // req/s; infinity: all at once
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no limit
  uint64_t seed = 0;            // the arrival schedule's
  bool progress = true;         // the bar on stderr
};

struct RunOutput {
  std::vector<RequestResult> results;  // samples' order
  double duration_s = 0.0;             // first send → last request done
};

// Sends every sample and waits for all. Never throws for a failed request.
RunOutput run_benchmark(const std::vector<SampleRequest>& samples, const RunConfig& cfg);

// One request on its own (vLLM's initial test run), blocking.
RequestResult run_one(const SampleRequest& sample, const RunConfig& cfg);

}  // namespace pagoda::bench
