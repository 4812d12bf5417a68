// A packed GPTQ 4-bit group-128 linear (dummy weights) at batches of
// M = 64 … 2048 rows — whatever path QuantLinearStore::linear takes there
// (gpu/quant_linear.h) — against cuBLASLt's bf16 GEMM on the same shapes:
// Llama-2-7B's qkv, o_proj, gate_up and down, TFLOP/s of each and their
// ratio (bench_qgemm.cpp).
#pragma once
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

void bench_qgemm(std::vector<Row>& rows);

}  // namespace pagoda::bench
