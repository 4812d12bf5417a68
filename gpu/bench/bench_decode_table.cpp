#include "gpu/bench/bench_decode_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"

namespace pagoda::bench {
namespace {

// B sequences decoding their token at position pos, each in its own run of
// blocks (sequence i owns blocks [i * max_blocks, (i + 1) * max_blocks)).
ForwardBatch decode_batch(int B, int pos, int max_blocks, int bs) {
  ForwardBatch b;
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc.push_back(0);
  for (int i = 0; i < B; ++i) {
    b.input_ids.push_back((i * 131 + pos * 7) % 30000 + 100);
    b.positions.push_back(pos);
    b.slot_mapping.push_back((i * max_blocks + pos / bs) * bs + pos % bs);
    for (int k = 0; k < max_blocks; ++k) b.block_tables.push_back(i * max_blocks + k);
    b.context_lens.push_back(pos + 1);
    b.query_start_loc.push_back(i + 1);
    b.logits_indices.push_back(i);
  }
  return b;
}

}  // namespace

double measure_copy_gbs() {
  auto backend = make_cuda_backend(0, DType::BF16);
  auto& b = dynamic_cast<cuda::CudaBackend&>(*backend);
  const int64_t n = int64_t(1) << 30;
  Tensor src = b.alloc(DType::U8, {n}), dst = b.alloc(DType::U8, {n});
  b.fill_zero(src);
  const double ms = time_ms(b.stream(), [&](int) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, b.stream()));
  });
  b.free(src);
  b.free(dst);
  return 2.0 * double(n) / (ms * 1e-3) / 1e9;
}

void bench_decode_table(const std::string& model_dir, const std::string& label, std::vector<Row>& rows,
                        int steps) {
  const double copy_gbs = measure_copy_gbs();
  rows.push_back({"ceiling: D2D copy 1 GiB", 0, fmt("%.0f GB/s", copy_gbs), "read+write bytes"});
  const ModelConfig c = ModelConfig::from_dir(model_dir);
  const int kWarmup = 3;
  const int contexts[] = {512, 2048};
  ExecutorOptions eo;
  eo.model_dir = model_dir;
  eo.device = "cuda";
  eo.dtype = "bfloat16";
  eo.load_format = "dummy";
  eo.max_model_len = contexts[1] + steps + kWarmup + 16;
  eo.max_num_seqs = 256;
  eo.max_num_batched_tokens = 8192;
  std::unique_ptr<ModelExecutor> ex = make_model_executor(c, eo);
  if (!ex->can_sample_on_device()) throw std::runtime_error("decode table: the executor does not sample on the device");
  const int bs = static_cast<int>(ex->block_size());

  const double H = double(c.hidden_size), I = double(c.intermediate_size), L = double(c.num_hidden_layers);
  const double D = double(c.head_dim), Hq = double(c.num_attention_heads), Hk = double(c.num_key_value_heads);
  const double linear = H * (Hq + 2 * Hk) * D + Hq * D * H + 3 * I * H;  // per layer
  // Bytes a linear's weight streams per element: bf16, or a quantized
  // checkpoint's codes plus, per group of a row, its fp32 scale and 8-bit
  // zero (the packed layout the CUDA kernels read: gpu/quant_linear.h;
  // group_size -1: one group of K). AWQ's modules_to_not_convert are
  // counted as quantized too (an underestimate for such checkpoints); a
  // dense MLP is assumed (3 · I · H).
  const QuantConfig& q = c.quantization;
  const double group = q.group_size > 0 ? double(q.group_size) : std::max(H, I);
  const double per_elem = !q.enabled() ? 2.0 : q.bits / 8.0 + 5.0 / group;
  const double weight_bytes =
      L * (linear * per_elem + 2.0 * 2 * H) + 2.0 * (double(c.vocab_size) * H + H);
  const double kv_bytes_per_token = 2.0 * 2.0 * L * Hk * D;  // K and V, bf16

  DeviceSamplingBatch sampling;
  std::vector<TokenLogprob> out;
  for (int ctx : contexts) {
    const int max_blocks = (ctx + kWarmup + steps + bs) / bs;  // every position the run writes
    for (int B : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      char name[200];
      std::snprintf(name, sizeof(name), "%s decode step, batch %d, context %d", label.c_str(), B, ctx);
      const int64_t need = int64_t(B) * max_blocks;
      if (need > ex->num_kv_blocks()) {
        rows.push_back({name, 0, "-",
                        fmt("not run: %.0f sequences of this context fit the KV cache",
                            double(ex->num_kv_blocks() / max_blocks))});
        continue;
      }
      sampling.clear();
      for (int i = 0; i < B; ++i) {
        DeviceSampleRow r;
        r.src_row = i;
        sampling.rows.push_back(r);
      }
      std::vector<double> ms;
      for (int s = 0; s < kWarmup + steps; ++s) {
        const ForwardBatch fb = decode_batch(B, ctx + s, max_blocks, bs);
        const auto a = std::chrono::steady_clock::now();
        ex->execute_and_sample(fb, sampling, out);
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        if (s >= kWarmup) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      const double kv = double(B) * (ctx + kWarmup + steps / 2.0) * kv_bytes_per_token;
      const double roof_ms = (weight_bytes + kv) / (copy_gbs * 1e9) * 1e3;
      char ceiling[200];
      std::snprintf(ceiling, sizeof(ceiling), "roofline %.3f ms (%.2f GB weights + %.2f GB KV): %.0f%% of it",
                    roof_ms, weight_bytes / 1e9, kv / 1e9, 100.0 * roof_ms / med);
      rows.push_back({name, med, fmt("%.0f tok/s", B * 1e3 / med), ceiling});
      std::printf("%s: %.3f ms, %s\n", name, med, ceiling);
      std::fflush(stdout);
    }
  }
}

}  // namespace pagoda::bench
