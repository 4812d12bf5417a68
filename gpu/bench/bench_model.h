// Whole-model decode benchmark (bench_model.cpp): Llama-family config from
// model_dir with dummy bf16 weights; batch-1 decode tokens/s and the
// fraction of the memory roofline (weight bytes per token / copy bandwidth).
#pragma once
#include <string>
#include <vector>

#include "gpu/bench/bench_util.h"

namespace pagoda::bench {
void bench_model(const std::string& model_dir, double copy_gbs, std::vector<Row>& rows);
}
