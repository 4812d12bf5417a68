// Issue 14's decode table: the served executor's decode step (dummy bf16
// weights, CUDA graphs as the engine captures them, greedy sampling on the
// device, the sampled ids back on the host) at batch 1, 2, 4, ..., 256 and
// contexts 512 and 2048, against that step's roofline: the bytes it must
// read (every weight once, plus each sequence's K and V over its context)
// divided by the measured device-to-device copy bandwidth (read + write
// bytes per second, as bench_kernels' ceiling).
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {

// model_dir: a config.json (Llama family: Llama-2-7B, Qwen2-7B presets).
// label names the shape in the rows. One row per (context, batch): median
// host-timed step over `steps` decode steps after 3 warm-up steps, tok/s,
// and the roofline with the ratio. A (context, batch) whose KV does not fit
// the executor's cache gets a row saying so. Throws std::runtime_error when
// the executor cannot be made (no GPU, bad config).
void bench_decode_table(const std::string& model_dir, const std::string& label, std::vector<Row>& rows,
                        int steps = 32);

// GB/s of a 1 GiB device-to-device cudaMemcpy, counting bytes read and
// written (a stream's copy ceiling).
double measure_copy_gbs();

}  // namespace pagoda::bench
