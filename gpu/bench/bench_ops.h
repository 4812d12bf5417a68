// Per-op time of one model step (bench_ops.cpp): the LlamaModel runs over a
// Backend wrapper that brackets every op with CUDA events on the CUDA
// backend's stream; times are summed by op (linear split by weight shape).
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {
// Appends rows "<step>: <op>" for a prefill step of 8 x 2048 tokens and
// decode steps at batch 1 (context 257), 8 (context 2049) and 256 (context
// 257), Llama-family config from model_dir, bf16.
void bench_ops(const std::string& model_dir, std::vector<Row>& rows);
}
