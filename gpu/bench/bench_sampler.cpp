#include "gpu/bench/bench_sampler.h"

#include <random>
#include <string>

#include "engine/model/backend.h"
#include "gpu/cuda_backend.h"
#include "gpu/gpu_sampler.h"

namespace pagoda::bench {

void bench_sampler(int64_t vocab, int64_t batch, std::vector<Row>& rows) {
  auto backend = make_cuda_backend(0, DType::F32);
  Tensor logits = backend->alloc(DType::F32, {batch, vocab});
  backend->fill_normal(logits, 0.f, 3.f, 5);
  cuda::GpuSampler sampler(*backend, vocab, static_cast<int32_t>(batch));
  std::mt19937_64 rng(3);
  auto run = [&](const std::string& what, auto&& set_row, bool penalties) {
    DeviceSamplingBatch b;
    for (int64_t i = 0; i < batch; ++i) {
      DeviceSampleRow r;
      r.src_row = static_cast<int32_t>(i);
      set_row(r);
      r.seed = rng();
      if (penalties) {
        r.slot = static_cast<int32_t>(i);
        DeviceSlotInit in;
        in.slot = r.slot;
        in.prompt_begin = static_cast<int32_t>(b.ids.size());
        in.prompt_count = 128;
        for (int k = 0; k < 256; ++k)
          b.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
        in.output_begin = in.prompt_begin + 128;
        in.output_count = 128;
        b.inits.push_back(in);
      }
      b.rows.push_back(r);
    }
    b.num_slots = static_cast<int32_t>(batch);
    std::vector<TokenLogprob> out;
    sampler.sample(logits, b, out);  // warm-up; slots built
    b.inits.clear();
    b.ids.clear();
    double sum = 0;
    const int reps = 20;
    for (int k = 0; k < reps; ++k) {
      for (auto& r : b.rows) r.seed = rng();
      sampler.sample(logits, b, out);
      sum += sampler.last_kernel_ms();
    }
    rows.push_back({"GpuSampler batch " + std::to_string(batch) + " x vocab " +
                        std::to_string(vocab) + ": " + what,
                    sum / reps, "kernel time per step (CUDA events)", "-"});
  };
  run(
      "greedy", [](DeviceSampleRow& r) { r.temperature = 0.f; }, false);
  run(
      "T 0.7 top_p 0.8 top_k 20 repetition_penalty 1.05",
      [](DeviceSampleRow& r) {
        r.temperature = 0.7f;
        r.top_p = 0.8f;
        r.top_k = 20;
        r.repetition_penalty = 1.05f;
      },
      true);
  run(
      "T 1.0 top_p 0.9 (no top_k)",
      [](DeviceSampleRow& r) {
        r.temperature = 1.0f;
        r.top_p = 0.9f;
      },
      false);
  run(
      "T 1.0 (plain)", [](DeviceSampleRow& r) { r.temperature = 1.0f; }, false);
  run(
      "greedy, logprobs 5",
      [](DeviceSampleRow& r) {
        r.temperature = 0.f;
        r.logprobs = 5;
      },
      false);
  run(
      "greedy, logprobs 20",
      [](DeviceSampleRow& r) {
        r.temperature = 0.f;
        r.logprobs = 20;
      },
      false);
  backend->free(logits);
}

}  // namespace pagoda::bench
