// pagoda_gpu_bench: per-kernel timings of the CUDA backend against measured
// ceilings (device-to-device copy bandwidth; bf16 GEMM rate on an
// 8192^3 product). Shapes are Llama-2-7B's (32 heads, head_dim 128,
// hidden 4096, intermediate 11008, vocab 32000). Not part of the test suite.
//   pagoda_gpu_bench [--out results.md] [--model-dir DIR] [--only
//   kernels|skinny|attn|prefill-attn|decode-attn|model|ops|engine|allreduce|sampler|qgemm|qgemv|moe|
//   decode-table]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "gpu/bench/bench_allreduce.h"
#include "gpu/bench/bench_decode_table.h"
#include "gpu/bench/bench_engine.h"
#include "gpu/bench/bench_model.h"
#include "gpu/bench/bench_moe.h"
#include "gpu/bench/bench_ops.h"
#include "gpu/bench/bench_qgemm.h"
#include "gpu/bench/bench_qgemv.h"
#include "gpu/bench/bench_sampler.h"
#include "gpu/bench/bench_util.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/device_info.h"
#include "gpu/kernels.h"

using namespace pagoda;
using namespace pagoda::bench;

namespace {

struct Ceilings {
  double copy_gbs = 0;      // GB/s, bytes read + written
  double gemm_tflops = 0;   // bf16 dense
};

Ceilings measure_ceilings(cuda::CudaBackend& b, std::vector<Row>& rows) {
  Ceilings c;
  const int64_t n = int64_t(1) << 30;  // 1 GiB each way
  Tensor src = b.alloc(DType::U8, {n}), dst = b.alloc(DType::U8, {n});
  b.fill_zero(src);
  double ms = time_ms(b.stream(), [&](int) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, b.stream()));
  });
  c.copy_gbs = 2.0 * n / (ms * 1e-3) / 1e9;
  rows.push_back({"ceiling: D2D copy 1 GiB", ms, fmt("%.0f GB/s", c.copy_gbs), "read+write bytes"});
  b.free(src);
  b.free(dst);

  const int64_t m = 8192;
  Tensor x = b.alloc(DType::BF16, {m, m}), w = b.alloc(DType::BF16, {m, m}), o = b.alloc(DType::BF16, {m, m});
  b.fill_normal(x, 0, 1, 1);
  b.fill_normal(w, 0, 1, 2);
  ms = time_ms(b.stream(), [&](int) { b.linear(x, w, nullptr, o); }, 10, 3);
  c.gemm_tflops = 2.0 * m * m * m / (ms * 1e-3) / 1e12;
  rows.push_back({"ceiling: bf16 GEMM 8192^3 (cuBLASLt)", ms, fmt("%.0f TFLOP/s", c.gemm_tflops), "random data"});
  b.free(x);
  b.free(w);
  b.free(o);
  return c;
}

// Paged KV cache filled with random data, blocks assigned in shuffled order.
struct AttnSetup {
  LayerKVCache cache;
  Tensor q, out;
  ForwardBatch fb;
};

AttnSetup make_attn(cuda::CudaBackend& b, int B, int qlen, int ctx, int Hq, int Hk, int D, int bs) {
  AttnSetup s;
  const int nbps = (ctx + bs - 1) / bs;
  const int nblocks = B * nbps;
  std::vector<int32_t> pool(nblocks);
  for (int i = 0; i < nblocks; ++i) pool[i] = i;
  std::mt19937 rng(7);
  std::shuffle(pool.begin(), pool.end(), rng);
  s.fb.max_blocks_per_seq = nbps;
  s.fb.query_start_loc.push_back(0);
  for (int i = 0; i < B; ++i) {
    for (int j = 0; j < nbps; ++j) s.fb.block_tables.push_back(pool[i * nbps + j]);
    for (int j = 0; j < qlen; ++j) {
      const int pos = ctx - qlen + j;
      s.fb.input_ids.push_back(0);
      s.fb.positions.push_back(pos);
      s.fb.slot_mapping.push_back(pool[i * nbps + pos / bs] * bs + pos % bs);
    }
    s.fb.context_lens.push_back(ctx);
    s.fb.query_start_loc.push_back(s.fb.query_start_loc.back() + qlen);
    s.fb.logits_indices.push_back(s.fb.query_start_loc.back() - 1);
  }
  s.cache.k = b.alloc(DType::BF16, {nblocks, bs, Hk, D});
  s.cache.v = b.alloc(DType::BF16, {nblocks, bs, Hk, D});
  b.fill_normal(s.cache.k, 0, 1, 3);
  b.fill_normal(s.cache.v, 0, 1, 4);
  const int64_t T = static_cast<int64_t>(B) * qlen;
  s.q = b.alloc(DType::BF16, {T, static_cast<int64_t>(Hq) * D});
  s.out = b.alloc(DType::BF16, {T, static_cast<int64_t>(Hq) * D});
  b.fill_normal(s.q, 0, 1, 5);
  return s;
}

void free_attn(cuda::CudaBackend& b, AttnSetup& s) {
  for (Tensor* t : {&s.cache.k, &s.cache.v, &s.q, &s.out}) b.free(*t);
}

// Decode attention over B sequences of ctx keys; `kernels` also times the
// fp32 CUDA-core kernel where the tensor-core one is the default.
void bench_decode(cuda::CudaBackend& b, const Ceilings& c, std::vector<Row>& rows, int B, int ctx,
                  int Hq, int Hk, bool kernels = false) {
  const int D = 128, bs = 16;
  AttnSetup s = make_attn(b, B, 1, ctx, Hq, Hk, D, bs);
  const DeviceBatch& db = b.upload_batch(s.fb);
  const float scale = 1.f / std::sqrt(float(D));
  const double bytes = 2.0 * B * ctx * Hk * D * 2;  // K and V, bf16
  std::vector<cuda::DecodeAttentionKernel> which = {cuda::DecodeAttentionKernel::kAuto};
  if (kernels) which.push_back(cuda::DecodeAttentionKernel::kSimt);
  for (const cuda::DecodeAttentionKernel k : which) {
    cuda::set_decode_attention_kernel(k);
    // Graph-timed (8 back-to-back calls, as in a decode step's graph); the
    // same cache each call, so a KV under ~40 MB is read from L2.
    const double ms = time_ms_graph(
        b.stream(), [&](int) { b.attention(s.q, s.cache, db, Hq, Hk, D, scale, s.out); }, 8, 20);
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    char name[160];
    std::snprintf(name, sizeof(name), "decode attn %d seq x %d ctx, %d/%d heads D128 bf16%s", B,
                  ctx, Hq, Hk,
                  k == cuda::DecodeAttentionKernel::kSimt ? " [CUDA-core kernel]" : "");
    rows.push_back({name, ms, fmt("%.0f GB/s", gbs),
                    fmt("%.0f%% of copy BW", 100.0 * gbs / c.copy_gbs) +
                        (bytes < 40e6 ? " (KV fits in L2)" : "")});
  }
  cuda::set_decode_attention_kernel(cuda::DecodeAttentionKernel::kAuto);
  free_attn(b, s);
}

void bench_prefill(cuda::CudaBackend& b, const Ceilings& c, std::vector<Row>& rows, int B, int S,
                   int Hq, int Hk) {
  const int D = 128, bs = 16;
  AttnSetup s = make_attn(b, B, S, S, Hq, Hk, D, bs);
  const DeviceBatch& db = b.upload_batch(s.fb);
  const float scale = 1.f / std::sqrt(float(D));
  // Causal: QK^T and PV over S(S+1)/2 (query, key) pairs, 2 FLOP per MAC.
  const double flops = 4.0 * B * Hq * D * (double(S) * (S + 1) / 2);
  char name[128];
  std::snprintf(name, sizeof(name), "prefill attn %d x %d, %d/%d heads D128 bf16", B, S, Hq, Hk);
  for (const auto& [tile, tag] :
       {std::pair{cuda::PrefillAttentionTile::kAuto, ""},
        std::pair{cuda::PrefillAttentionTile::k64Rows, " [64-row CTAs]"},
        std::pair{cuda::PrefillAttentionTile::k128Rows, " [128-row CTAs]"},
        std::pair{cuda::PrefillAttentionTile::k128RowsWarp32, " [128-row CTAs, 32 rows a warp]"}}) {
    cuda::set_prefill_attention_tile(tile);
    const double ms =
        time_ms(b.stream(), [&](int) { b.attention(s.q, s.cache, db, Hq, Hk, D, scale, s.out); }, 5, 1);
    const double tf = flops / (ms * 1e-3) / 1e12;
    rows.push_back({std::string(name) + tag, ms, fmt("%.1f TFLOP/s", tf),
                    fmt("%.1f%% of bf16 GEMM rate (tensor-core kernel)", 100.0 * tf / c.gemm_tflops)});
  }
  cuda::set_prefill_attention_tile(cuda::PrefillAttentionTile::kAuto);
  // The fp32 CUDA-core kernel on the same problem (the F32 / odd head_dim path).
  cuda::AttentionArgs a;
  a.q = s.q.data;
  a.k_cache = s.cache.k.data;
  a.v_cache = s.cache.v.data;
  a.out = s.out.data;
  a.query_start_loc = db.query_start_loc.ptr<int32_t>();
  a.context_lens = db.context_lens.ptr<int32_t>();
  a.block_tables = db.block_tables.ptr<int32_t>();
  a.num_seqs = db.num_seqs;
  a.num_tokens = db.num_tokens;
  a.max_query_len = db.max_query_len;
  a.max_context_len = db.max_context_len;
  a.max_blocks_per_seq = db.max_blocks_per_seq;
  a.num_heads = Hq;
  a.num_kv_heads = Hk;
  a.head_dim = D;
  a.block_size = bs;
  a.scale = scale;
  const double ms2 = time_ms(b.stream(), [&](int) { cuda::launch_prefill_attention_simt(DType::BF16, a, b.stream()); }, 3, 1);
  const double tf2 = flops / (ms2 * 1e-3) / 1e12;
  rows.push_back({std::string(name) + " [CUDA-core kernel]", ms2, fmt("%.1f TFLOP/s", tf2),
                  "fp32 FMA peak ~67 TFLOP/s (datasheet)"});
  free_attn(b, s);
}

// kernel: which small-M path LtGemm takes (its own choice, or one forced).
using GemmKernel = cuda::LtGemm::SmallM;

void bench_gemm(cuda::CudaBackend& b, const Ceilings& c, std::vector<Row>& rows, const char* what,
                int64_t M, int64_t N, int64_t K, GemmKernel kernel = GemmKernel::kAuto) {
  b.gemm().set_small_m(kernel);
  // Rotate over enough weight copies to exceed the 60 MB L2 several times.
  const int64_t wbytes = N * K * 2;
  const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t(512) << 20) / wbytes + 1));
  std::vector<Tensor> ws;
  for (int i = 0; i < copies; ++i) {
    ws.push_back(b.alloc(DType::BF16, {N, K}));
    b.fill_normal(ws.back(), 0, 0.02f, 10 + i);
  }
  Tensor x = b.alloc(DType::BF16, {M, K}), o = b.alloc(DType::BF16, {M, N});
  b.fill_normal(x, 0, 1, 9);
  // Back-to-back launches in one CUDA graph (as a decode step runs them):
  // no host launch gap in the time, the tails overlapping under PDL.
  const double ms = time_ms_graph(
      b.stream(), [&](int i) { b.linear(x, ws[i % copies], nullptr, o); }, 8, 20);
  const double bytes = double(wbytes) + 2.0 * M * K + 2.0 * M * N;
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  const double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
  const char* tag = kernel == GemmKernel::kCublas   ? " [cuBLASLt]"
                    : kernel == GemmKernel::kGemv   ? " [GEMV kernel]"
                    : kernel == GemmKernel::kSkinny ? " [skinny tensor-core kernel]"
                                                    : "";
  char name[160];
  std::snprintf(name, sizeof(name), "GEMM %s M=%lld N=%lld K=%lld bf16%s", what, (long long)M,
                (long long)N, (long long)K, tag);
  if (kernel != GemmKernel::kAuto && M <= 64)
    rows.push_back({name, ms, fmt("%.0f GB/s", gbs),
                    fmt("%.0f%% of copy BW (weights + x + out bytes)", 100.0 * gbs / c.copy_gbs)});
  else if (M == 1)
    rows.push_back({name, ms, fmt("%.0f GB/s", gbs), fmt("%.0f%% of copy BW", 100.0 * gbs / c.copy_gbs)});
  else
    rows.push_back({name, ms, fmt("%.0f TFLOP/s", tf), fmt("%.0f%% of GEMM ceiling", 100.0 * tf / c.gemm_tflops)});
  for (auto& w : ws) b.free(w);
  b.free(x);
  b.free(o);
  b.gemm().set_small_m(GemmKernel::kAuto);
}

// Issue 14's small-M GEMMs: the Llama-2-7B and Qwen2-7B linears at decode batch sizes
// through each kernel (GEMV only up to M = 8), against the copy bandwidth.
void bench_skinny(cuda::CudaBackend& b, const Ceilings& c, std::vector<Row>& rows) {
  struct Shape {
    const char* what;
    int64_t N, K;
  };
  for (const Shape s :
       {Shape{"qkv", 3 * 4096, 4096}, Shape{"o_proj", 4096, 4096},
        Shape{"gate_up", 2 * 11008, 4096}, Shape{"down", 4096, 11008},
        Shape{"Qwen2-7B qkv", 3584 + 2 * 512, 3584}, Shape{"Qwen2-7B o_proj", 3584, 3584},
        Shape{"Qwen2-7B gate_up", 2 * 18944, 3584}, Shape{"Qwen2-7B down", 3584, 18944}})
    for (const int64_t M : {1, 2, 3, 4, 6, 8, 12, 16, 32, 64}) {
      if (M <= 8) bench_gemm(b, c, rows, s.what, M, s.N, s.K, GemmKernel::kGemv);
      bench_gemm(b, c, rows, s.what, M, s.N, s.K, GemmKernel::kSkinny);
      bench_gemm(b, c, rows, s.what, M, s.N, s.K, GemmKernel::kCublas);
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, model_dir, only;
  EngineBenchOptions eb;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
    else if (!std::strcmp(argv[i], "--model-dir") && i + 1 < argc) model_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--tokenizer-dir") && i + 1 < argc) eb.tokenizer_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--label") && i + 1 < argc) eb.label = argv[++i];
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) eb.dtype = argv[++i];
    else if (!std::strcmp(argv[i], "--requests") && i + 1 < argc) eb.offline_requests = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-prefill")) eb.prefill = false;
    else if (!std::strcmp(argv[i], "--max-num-seqs") && i + 1 < argc)
      eb.max_num_seqs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-num-batched-tokens") && i + 1 < argc)
      eb.max_num_batched_tokens = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--enforce-eager")) eb.enforce_eager = true;
    else if (!std::strcmp(argv[i], "--sampling-variants")) eb.sampling_variants = true;
    else if (!std::strcmp(argv[i], "--no-prefix-caching"))
      eb.enable_prefix_caching = false;
    else if (!std::strcmp(argv[i], "--chat") && i + 1 < argc)
      eb.chat_conversations = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--tensor-parallel-size") && i + 1 < argc) eb.tensor_parallel_size = std::atoi(argv[++i]);
    else {
      std::fprintf(
          stderr,
          "usage: %s [--out FILE] [--model-dir DIR] [--only "
          "kernels|skinny|attn|prefill-attn|decode-attn|model|ops|engine|allreduce|sampler|qgemm|"
          "qgemv|moe|"
          "decode-"
          "table]\n"
          "  skinny: Llama-2-7B's and Qwen2-7B's linears at M = 1 .. 64 through the GEMV, skinny\n"
          "          tensor-core and cuBLASLt kernels (graph-timed)\n"
          "  attn: prefill attention (each CTA shape), then decode-attn's table\n"
          "  prefill-attn: prefill attention alone, 8 x 2048 and 1 x 8192 tokens\n"
          "  decode-attn: one layer's decode attention, Llama-2-7B and Qwen2-7B heads, batch 1 .. "
          "256,\n"
          "          contexts 512 and 2048, tensor-core and CUDA-core kernels, against the copy "
          "bandwidth\n"
          "  decode-table: --model-dir DIR [--label NAME]: the served decode step at batch "
          "1..256,\n"
          "          contexts 512 and 2048, against weight + KV bytes / copy bandwidth\n"
          "  qgemm: int4 linears against cuBLASLt bf16 on Llama-2-7B's shapes, M = 64 .. 2048\n"
          "  qgemv: the int4 decode kernels (qmv: M <= 8, qmma) and the bf16 linear on "
          "Llama-2-7B's\n"
          "         shapes, M = 1 .. 32, bytes read against the copy bandwidth\n"
          "  moe: Mixtral-8x7B's expert linears at T = 1 .. 16 tokens through the expert GEMV\n"
          "       and the grouped tensor-core GEMM, bytes read against the copy bandwidth\n"
          "  engine: [--tokenizer-dir DIR] [--label NAME] [--requests N] [--no-prefill] "
          "[--enforce-eager] [--dtype bfloat16|float16]\n"
          "          [--max-num-seqs N (256)] [--max-num-batched-tokens N (8192; 16384 with the "
          "prefill row)]\n"
          "          [--tensor-parallel-size N] [--sampling-variants] [--chat CONVERSATIONS] "
          "[--no-prefix-caching]\n"
          "  sampler: the device sampler's kernel time at batch 256 (vocab from --model-dir)\n"
          "  allreduce: --tensor-parallel-size N (NCCL over GPUs 0..N-1; hidden size and layers "
          "from\n"
          "             --model-dir's config.json)\n",
          argv[0]);
      return 2;
    }
  }
  // The table on stdout and, with --out, in that file (header: a first line, e.g. the device).
  const auto emit = [&](const std::vector<Row>& rows, const std::string& header) {
    print_table(rows, stdout);
    if (out_path.empty()) return;
    if (FILE* f = std::fopen(out_path.c_str(), "w")) {
      if (!header.empty()) std::fprintf(f, "%s\n\n", header.c_str());
      print_table(rows, f);
      std::fclose(f);
    }
  };
  if (only == "qgemm" || only == "qgemv" || only == "moe") {
    std::vector<Row> rows;
    try {
      if (only == "qgemm") bench_qgemm(rows);
      else if (only == "moe") bench_moe(rows);
      else bench_qgemv(rows);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s benchmark failed: %s\n", only.c_str(), e.what());
      return 1;
    }
    emit(rows, "");
    return 0;
  }
  if (only == "engine" || only == "ops" || only == "allreduce" || only == "sampler" ||
      only == "decode-table") {
    if (model_dir.empty()) {
      std::fprintf(stderr, "--only %s needs --model-dir\n", only.c_str());
      return 2;
    }
    std::vector<Row> rows;
    bool failed = false;
    try {
      if (only == "ops") {
        bench_ops(model_dir, rows);
      } else if (only == "decode-table") {
        bench_decode_table(model_dir, eb.label.empty() ? model_dir : eb.label, rows);
      } else if (only == "sampler") {
        bench_sampler(ModelConfig::from_dir(model_dir).vocab_size, 256, rows);
      } else if (only == "allreduce") {
        bench_allreduce(model_dir, eb.tensor_parallel_size, rows);
      } else {
        eb.model_dir = model_dir;
        if (eb.label.empty()) eb.label = model_dir;
        bench_engine(eb, rows);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s benchmark failed: %s\n", only.c_str(), e.what());
      rows.push_back({only + " benchmark FAILED: " + e.what(), 0, "-", "-"});
      failed = true;
    }
    emit(rows, "");
    return failed ? 1 : 0;
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "pagoda_gpu_bench: no CUDA device\n");
    return 1;
  }
  bool model_failed = false;
  try {
    auto backend = make_cuda_backend(0, DType::BF16);
    auto& b = dynamic_cast<cuda::CudaBackend&>(*backend);
    std::vector<Row> rows;
    std::printf("device: %s\n", cuda::device_description(0).c_str());
    Ceilings c = measure_ceilings(b, rows);
    if (only == "skinny") {
      bench_skinny(b, c, rows);
    } else if (only == "attn") {
      // Issue 14: prefill attention (both CTA sizes), then decode attention
      // (Llama-2-7B's 32 MHA heads and Qwen2-7B's 28 on 4 KV heads, per
      // layer, both kernels).
      bench_prefill(b, c, rows, 8, 2048, 32, 32);
      bench_prefill(b, c, rows, 1, 512, 32, 32);
      bench_prefill(b, c, rows, 8, 2048, 28, 4);
      for (const auto& [Hq, Hk] : {std::pair{32, 32}, std::pair{28, 4}})
        for (int ctx : {512, 2048})
          for (int B : {1, 2, 4, 8, 64, 256}) bench_decode(b, c, rows, B, ctx, Hq, Hk, true);
    } else if (only == "prefill-attn") {
      // Prefill attention alone: the problems above and long single prompts.
      bench_prefill(b, c, rows, 8, 2048, 32, 32);
      bench_prefill(b, c, rows, 8, 2048, 28, 4);
      bench_prefill(b, c, rows, 1, 8192, 32, 32);
      bench_prefill(b, c, rows, 1, 8192, 28, 4);
      bench_prefill(b, c, rows, 1, 2048, 32, 32);
      bench_prefill(b, c, rows, 1, 1024, 32, 32);
      bench_prefill(b, c, rows, 4, 512, 32, 32);
      bench_prefill(b, c, rows, 1, 512, 32, 32);
    } else if (only == "decode-attn") {
      // Issue 14: decode attention, Llama-2-7B (32 MHA heads) and Qwen2-7B
      // (28 query heads on 4 KV heads) per layer, both kernels.
      for (const auto& [Hq, Hk] : {std::pair{32, 32}, std::pair{28, 4}})
        for (int ctx : {512, 2048})
          for (int B : {1, 2, 4, 8, 64, 256}) bench_decode(b, c, rows, B, ctx, Hq, Hk, true);
    } else if (only != "model") {
      bench_decode(b, c, rows, 32, 2048, 32, 32);
      bench_decode(b, c, rows, 1, 8192, 32, 32);
      bench_decode(b, c, rows, 64, 4096, 32, 8);
      bench_prefill(b, c, rows, 8, 2048, 32, 32);
      bench_gemm(b, c, rows, "qkv", 1, 3 * 4096, 4096, GemmKernel::kCublas);
      bench_gemm(b, c, rows, "o_proj", 1, 4096, 4096, GemmKernel::kCublas);
      bench_gemm(b, c, rows, "down", 1, 4096, 11008, GemmKernel::kCublas);
      for (int64_t M : {1, 256}) {
        bench_gemm(b, c, rows, "qkv", M, 3 * 4096, 4096);
        bench_gemm(b, c, rows, "o_proj", M, 4096, 4096);
        bench_gemm(b, c, rows, "gate_up", M, 2 * 11008, 4096);
        bench_gemm(b, c, rows, "down", M, 4096, 11008);
        bench_gemm(b, c, rows, "lm_head", M, 32000, 4096);
      }
    }
    if (!model_dir.empty() && only != "kernels") {
      try {
        bench_model(model_dir, c.copy_gbs, rows);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "model benchmark failed: %s\n", e.what());
        rows.push_back({std::string("model benchmark FAILED: ") + e.what(), 0, "-", "-"});
        model_failed = true;
      }
    }
    std::printf("\n");
    emit(rows, "device: " + cuda::device_description(0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda_gpu_bench: %s\n", e.what());
    return 1;
  }
  return model_failed ? 1 : 0;
}
