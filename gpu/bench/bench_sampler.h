// The device sampler's kernel time per step (bench_sampler.cpp): GpuSampler
// over [batch, vocab] F32 logits for greedy rows, the seeds' Qwen2 settings
// (temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05, penalty
// slots of 256-token histories) and greedy with logprobs=5.
#pragma once
#include <cstdint>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

void bench_sampler(int64_t vocab, int64_t batch, std::vector<Row>& rows);

}  // namespace pagoda::bench
