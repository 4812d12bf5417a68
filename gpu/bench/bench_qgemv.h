// The int4 decode kernel at decode batches (bench_qgemv.cpp): a packed
// GPTQ 4-bit group-128 linear (dummy codes) of each of Llama-2-7B's shapes
// (qkv, o_proj, gate_up, down) at M = 1, 2, 4, 8, 16, 32 through
// launch_qmma (gpu/quant_kernels.h), and the bf16 linear
// of the same shape through CudaBackend::linear; each as bytes read per
// call (codes + scales + zeros, or the bf16 weight) over its time, against
// the measured device-to-device copy bandwidth.
#pragma once
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

void bench_qgemv(std::vector<Row>& rows);

}  // namespace pagoda::bench
