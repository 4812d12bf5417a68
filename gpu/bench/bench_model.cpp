#include "gpu/bench/bench_model.h"

#include <cstdio>

namespace pagoda::bench {
// Filled in once LlamaModel lands (engine/model/llama.h).
void bench_model(const std::string& model_dir, double, std::vector<Row>&) {
  std::printf("model benchmark for %s: LlamaModel not available in this build\n", model_dir.c_str());
}
}  // namespace pagoda::bench
