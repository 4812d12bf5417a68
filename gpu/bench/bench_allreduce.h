// NCCL all-reduce cost of tensor parallelism (issue 7): the bf16 sum of a
// [M, hidden] activation over the ranks of one host, the call the row-
// parallel o_proj and down_proj make twice per layer (Megatron-LM, Shoeybi et
// al. 2019, arXiv:1909.08053, section 3). Measured per call (eager, CUDA
// events on each rank's stream) and as one step's 2 x num_hidden_layers calls
// replayed from a CUDA graph per rank, as the executor's decode graphs run
// them. Needs tp GPUs and a build with NCCL (PAGODA_HAVE_NCCL).
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

// model_dir: config.json for hidden_size and num_hidden_layers; tp: ranks
// (GPUs 0..tp-1). Appends one row per batch size M in {1, 8, 64, 256}.
// Throws std::runtime_error when fewer than tp GPUs exist or NCCL is absent.
void bench_allreduce(const std::string& model_dir, int tp, std::vector<Row>& rows);

}  // namespace pagoda::bench
