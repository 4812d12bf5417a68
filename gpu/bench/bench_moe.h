// The experts' linears of the MoE MLP at decode batches (bench_moe.cpp):
// Mixtral-8x7B's shapes (8 experts, top-2; gate_up [28672 x 4096], down
// [4096 x 14336] per expert, bf16, dummy weights) at T = 1, 2, 4, 8, 12, 16
// tokens of a fixed random routing, through the expert-indexed GEMV
// (launch_moe_gemv) and the tensor-core grouped GEMM (launch_moe_gemm_mma)
// on the same launch_moe_align tiles; each as the bytes of the experts in
// use (read once per call) over its time, against the measured
// device-to-device copy bandwidth. For tuning kMoeGemvMaxTokens
// (gpu/moe_kernels.h).
#pragma once
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

void bench_moe(std::vector<Row>& rows);

}  // namespace pagoda::bench
