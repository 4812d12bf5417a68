// Whole-model decode benchmark: a Llama-family config (e.g. Llama-2-7B's
// preset) with dummy bf16 weights (device-side normal fill), one prompt
// prefilled, then greedy-shaped decode steps timed end to end on the host
// (upload_batch + forward + logits to host, as the engine does per step).
// Roofline: bytes of weights read per decode step (every matrix once; the
// embedding table contributes one row) over the measured copy bandwidth.
#include "gpu/bench/bench_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/model/llama.h"
#include "engine/model/model_config.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace pagoda::bench {
namespace {

// B sequences of ctx0 tokens already cached, each adding one token at
// position ctx0 (decode), or a prefill of ctx0 + 1 tokens when prefill.
ForwardBatch make_batch(int B, int pos, int qlen, int max_blocks, int bs) {
  ForwardBatch b;
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc.push_back(0);
  for (int i = 0; i < B; ++i) {
    for (int j = 0; j < qlen; ++j) {
      const int p = pos + j;
      b.input_ids.push_back((i * 131 + p * 7) % 32000);
      b.positions.push_back(p);
      b.slot_mapping.push_back((i * max_blocks + p / bs) * bs + p % bs);
    }
    for (int k = 0; k < max_blocks; ++k) b.block_tables.push_back(i * max_blocks + k);
    b.context_lens.push_back(pos + qlen);
    b.query_start_loc.push_back(b.query_start_loc.back() + qlen);
    b.logits_indices.push_back(b.query_start_loc.back() - 1);
  }
  return b;
}

}  // namespace

void bench_model(const std::string& model_dir, double copy_gbs, std::vector<Row>& rows) {
  const ModelConfig c = ModelConfig::from_dir(model_dir);
  auto backend = make_cuda_backend(0, DType::BF16);
  LlamaModel model(c, *backend);
  auto t0 = std::chrono::steady_clock::now();
  model.load_dummy_weights(1234);
  backend->synchronize();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("model %s: dummy weights in %.3f s\n", model_dir.c_str(), load_s);

  const int bs = 16, prompt = 128, steps = 128, max_batch = 32;
  const int max_blocks = (prompt + steps + bs) / bs + 1;
  model.allocate_kv_cache(static_cast<int64_t>(max_batch) * max_blocks, bs);
  model.allocate_workspace(static_cast<int64_t>(max_batch) * prompt, max_batch, c.max_position_embeddings);

  const double H = double(c.hidden_size), I = double(c.intermediate_size), L = double(c.num_hidden_layers);
  const double D = double(c.head_dim), Hq = double(c.num_attention_heads), Hk = double(c.num_key_value_heads);
  const double per_layer = H * (Hq + 2 * Hk) * D + Hq * D * H + 2 * I * H + I * H + 2 * H;
  const double weight_bytes = 2.0 * (L * per_layer + double(c.vocab_size) * H + H + H);
  const double roof_ms = weight_bytes / (copy_gbs * 1e9) * 1e3;
  std::vector<float> logits(static_cast<size_t>(max_batch) * c.vocab_size);

  for (int B : {1, 32}) {
    // Prefill each sequence's prompt (one batch), then decode.
    {
      const DeviceBatch& db = backend->upload_batch(make_batch(B, 0, prompt, max_blocks, bs));
      Tensor lg = model.forward(db);
      backend->copy_to_host(logits.data(), lg);
    }
    std::vector<double> ms;
    for (int s = 0; s < steps; ++s) {
      const ForwardBatch fb = make_batch(B, prompt + s, 1, max_blocks, bs);
      const auto a = std::chrono::steady_clock::now();
      const DeviceBatch& db = backend->upload_batch(fb);
      Tensor lg = model.forward(db);
      backend->copy_to_host(logits.data(), lg);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.begin() + steps);
    const double med = ms[steps / 2];
    const double toks = B * 1e3 / med;
    char name[160];
    std::snprintf(name, sizeof(name), "model decode step, batch %d, ctx %d..%d (Llama-2-7B shape, bf16, eager)", B,
                  prompt, prompt + steps);
    if (B == 1) {
      std::vector<float> eager_last(logits.begin(), logits.begin() + c.vocab_size);
      // The same steps replayed from one CUDA graph of the decode forward
      // (captured once; upload_batch refills the same device buffers). This
      // shows the replay alone; captured at the longest context of the run
      // so its Flash-Decoding grid covers every step (the executor's
      // DecodeGraphs capture at max_model_len the same way).
      cudaStream_t st = dynamic_cast<cuda::CudaBackend&>(*backend).stream();
      {
        const DeviceBatch& db = backend->upload_batch(make_batch(1, 0, prompt, max_blocks, bs));
        Tensor lg = model.forward(db);
        backend->copy_to_host(logits.data(), lg);
      }
      const DeviceBatch& db0 = backend->upload_batch(make_batch(1, prompt + steps - 1, 1, max_blocks, bs));
      backend->synchronize();
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      PAGODA_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      Tensor lg = model.forward(db0);
      PAGODA_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      PAGODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      std::vector<double> gms;
      for (int s = 0; s < steps; ++s) {
        const ForwardBatch fb = make_batch(1, prompt + s, 1, max_blocks, bs);
        const auto a = std::chrono::steady_clock::now();
        backend->upload_batch(fb);
        PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, st));
        backend->copy_to_host(logits.data(), lg);
        gms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      double maxdiff = 0;
      for (int64_t v = 0; v < c.vocab_size; ++v)
        maxdiff = std::max(maxdiff, double(std::fabs(logits[static_cast<size_t>(v)] - eager_last[static_cast<size_t>(v)])));
      std::sort(gms.begin(), gms.end());
      const double gmed = gms[steps / 2];
      rows.push_back({"model decode step, batch 1, CUDA graph replay (same steps)", gmed,
                      fmt("%.1f tok/s", 1e3 / gmed),
                      fmt("%.0f%% of roofline; ", 100.0 * roof_ms / gmed) +
                          fmt("last-step logits max |graph - eager| = %.3g (expect 0: deterministic kernels)", maxdiff)});
    }
    if (B == 1)
      rows.push_back({name, med, fmt("%.1f tok/s", toks),
                      fmt("roofline %.2f ms/token (", roof_ms) + fmt("%.2f GB weights): ", weight_bytes / 1e9) +
                          fmt("%.0f%% of it", 100.0 * roof_ms / med)});
    else
      rows.push_back({name, med, fmt("%.0f tok/s", toks), fmt("%.0f%% of weight-read roofline per step", 100.0 * roof_ms / med)});
  }
}

}  // namespace pagoda::bench
