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
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace pagoda::bench
