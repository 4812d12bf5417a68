// Timing helpers for the GPU benchmarks: CUDA events on the backend's
// stream, warm-up, median of repeats; a results table printed last.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu/cuda_check.h"

namespace pagoda::bench {

// Median milliseconds of `reps` timed runs of fn (each bracketed by events)
// after `warmup` untimed runs.
inline double time_ms(cudaStream_t s, const std::function<void(int)>& fn, int reps = 20,
                      int warmup = 3) {
  for (int i = 0; i < warmup; ++i) fn(i);
  cudaEvent_t a, b;
  PAGODA_CUDA_CHECK(cudaEventCreate(&a));
  PAGODA_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    PAGODA_CUDA_CHECK(cudaEventRecord(a, s));
    fn(warmup + i);
    PAGODA_CUDA_CHECK(cudaEventRecord(b, s));
    PAGODA_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PAGODA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median milliseconds per call of fn, timed as `reps` replays of one CUDA
// graph holding `per_graph` back-to-back calls fn(0) … fn(per_graph − 1):
// the steady state of kernels launched one after another as in a decode
// step's graph — no host launch gaps in the timing, and each launch's tail
// overlapping the next one's start where the kernels use programmatic
// dependent launch (gpu/pdl.h). fn runs per_graph times first, outside the
// capture (plans, shared-memory opt-ins). Where the calls cannot be
// captured, times them as time_ms does instead and sets *graphed = false
// (left as it was otherwise).
// Rethrows what fn throws (after ending the capture).
inline double time_ms_graph(cudaStream_t s, const std::function<void(int)>& fn, int per_graph = 8,
                            int reps = 20, bool* graphed = nullptr) {
  for (int i = 0; i < per_graph; ++i) fn(i);
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  bool ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    try {
      for (int i = 0; i < per_graph; ++i) fn(i);
    } catch (...) {
      cudaStreamEndCapture(s, &g);
      if (g != nullptr) cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw;
    }
    ok = cudaStreamEndCapture(s, &g) == cudaSuccess && g != nullptr;
  }
  if (ok) ok = cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
  if (!ok) {
    (void)cudaGetLastError();
    if (g != nullptr) cudaGraphDestroy(g);
    if (graphed != nullptr) *graphed = false;
    return time_ms(s, fn, reps, 3);
  }
  const double ms = time_ms(
      s, [&](int) { PAGODA_CUDA_CHECK(cudaGraphLaunch(ge, s)); }, reps, 2);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms / per_graph;
}

struct Row {
  std::string name;
  double ms;
  std::string figure;   // "3.9 TB/s", "512 TFLOP/s", "123 tok/s"
  std::string ceiling;  // "of 4.3 TB/s copy (91%)"
};

inline void print_table(const std::vector<Row>& rows, FILE* f) {
  std::fprintf(f, "| benchmark | median ms | achieved | vs ceiling |\n|---|---:|---:|---|\n");
  for (const auto& r : rows)
    std::fprintf(f, "| %s | %.4f | %s | %s |\n", r.name.c_str(), r.ms, r.figure.c_str(), r.ceiling.c_str());
}

inline std::string fmt(const char* f, double v) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace pagoda::bench
