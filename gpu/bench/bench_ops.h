// Per-op time of one model step (bench_ops.cpp): the LlamaModel runs over a
// Backend wrapper that brackets every op with CUDA events on the CUDA
// backend's stream; times are summed by op (linear split by weight shape).
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {
// Appends rows "<step>: <op>" for a batch-1 decode step (context 256) and a
// prefill step of 8 x 2048 tokens, Llama-family config from model_dir, bf16.
void bench_ops(const std::string& model_dir, std::vector<Row>& rows);
}
