#include "gpu/bench/bench_qgemv.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "gpu/bench/bench_decode_table.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/quant_kernels.h"

namespace pagoda::bench {

void bench_qgemv(std::vector<Row>& rows) {
  auto backend = make_cuda_backend(0, DType::BF16);
  auto& b = dynamic_cast<cuda::CudaBackend&>(*backend);
  const cudaStream_t st = b.stream();
  const double copy_gbs = measure_copy_gbs();
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  constexpr int64_t kGroup = 128;
  constexpr int kPerGraph = 8;
  bool graphed = true;
  for (const Shape& s : {Shape{"qkv", 3 * 4096, 4096}, Shape{"o_proj", 4096, 4096},
                         Shape{"gate_up", 2 * 11008, 4096}, Shape{"down", 4096, 11008}}) {
    const int64_t G = s.K / kGroup;
    const size_t qbytes = static_cast<size_t>(s.N * s.K / 2);
    const size_t int4_bytes = qbytes + static_cast<size_t>(s.N * G) * 5;
    const size_t bf16_bytes = static_cast<size_t>(s.N * s.K) * 2;
    // Copies rotated so every call reads its weight from DRAM (together
    // more than 256 MB, several times the 60 MB L2).
    const int nq = static_cast<int>(std::max<size_t>(2, (size_t(256) << 20) / int4_bytes + 1));
    const int nb = static_cast<int>(std::max<size_t>(2, (size_t(256) << 20) / bf16_bytes + 1));
    struct Packed {
      uint32_t* q;
      float* sc;
      uint8_t* z;
    };
    std::vector<Packed> pk(static_cast<size_t>(nq));
    for (int i = 0; i < nq; ++i) {
      Packed& p = pk[static_cast<size_t>(i)];
      PAGODA_CUDA_CHECK(cudaMalloc(&p.q, qbytes));
      PAGODA_CUDA_CHECK(cudaMalloc(&p.sc, static_cast<size_t>(s.N * G) * 4));
      PAGODA_CUDA_CHECK(cudaMalloc(&p.z, static_cast<size_t>(s.N * G)));
      cuda::launch_qfill_dummy(4, p.q, p.sc, p.z, s.N, s.K, G, 100 + static_cast<uint64_t>(i), st);
    }
    std::vector<Tensor> wb;
    for (int i = 0; i < nb; ++i) {
      wb.push_back(b.alloc(DType::BF16, {s.N, s.K}));
      b.fill_normal(wb.back(), 0, 0.02f, 20 + i);
    }
    // The large-batch path's scratch (QuantLinearStore: above the qmma rows
    // the codes are dequantized into it, then cuBLASLt) and its chunk groups.
    Tensor deq = b.alloc(DType::BF16, {s.N, s.K});
    std::vector<int32_t> cg_host(static_cast<size_t>(s.K / 32));
    for (size_t c = 0; c < cg_host.size(); ++c)
      cg_host[c] = static_cast<int32_t>(static_cast<int64_t>(c) * 32 / kGroup);
    int32_t* cg = nullptr;
    PAGODA_CUDA_CHECK(cudaMalloc(&cg, cg_host.size() * 4));
    PAGODA_CUDA_CHECK(cudaMemcpy(cg, cg_host.data(), cg_host.size() * 4, cudaMemcpyHostToDevice));
    for (const int64_t M : {1, 2, 4, 8, 16, 32, 40, 48, 56, 64}) {
      Tensor x = b.alloc(DType::BF16, {M, s.K}), o = b.alloc(DType::BF16, {M, s.N});
      b.fill_normal(x, 0, 1, 9);
      const double ms_m = time_ms_graph(
          st,
          [&](int i) {
            const Packed& p = pk[static_cast<size_t>(i % nq)];
            cuda::launch_qmma(DType::BF16, DType::BF16, x.data, p.q, p.sc, p.z, nullptr, kGroup,
                              nullptr, o.data, s.N, M, s.N, s.K, G, st);
          },
          kPerGraph, 20, &graphed);
      const double ms_v =
          M > 8 ? 0.0
                : time_ms_graph(
                      st,
                      [&](int i) {
                        const Packed& p = pk[static_cast<size_t>(i % nq)];
                        cuda::launch_qmv(DType::BF16, DType::BF16, x.data, p.q, p.sc, p.z, nullptr,
                                         kGroup, nullptr, o.data, s.N, M, s.N, s.K, G, st);
                      },
                      kPerGraph, 20, &graphed);
      const double ms_d =
          M <= 32 ? 0.0
                  : time_ms_graph(
                        st,
                        [&](int i) {
                          const Packed& p = pk[static_cast<size_t>(i % nq)];
                          cuda::launch_qdequant_tiled(DType::BF16, p.q, p.sc, p.z, cg, nullptr,
                                                      deq.data, s.N, s.K, G, st);
                          b.gemm().run(DType::BF16, DType::BF16, x.data, deq.data, nullptr,
                                       DType::BF16, o.data, M, s.N, s.K);
                        },
                        kPerGraph, 20, &graphed);
      const double ms_b = time_ms_graph(
          st, [&](int i) { b.linear(x, wb[static_cast<size_t>(i % nb)], nullptr, o); }, kPerGraph,
          20, &graphed);
      const auto add = [&](const char* kernel, double ms, size_t bytes) {
        const double gbs = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
        char name[160];
        std::snprintf(name, sizeof(name), "%s M=%lld N=%lld K=%lld: %s", s.name,
                      static_cast<long long>(M), static_cast<long long>(s.N),
                      static_cast<long long>(s.K), kernel);
        rows.push_back({name, ms, fmt("%.0f GB/s", gbs),
                        fmt("%.0f%% of the copy bandwidth", 100.0 * gbs / copy_gbs)});
      };
      if (M <= 8) add("int4 qmv", ms_v, int4_bytes);
      add("int4 qmma", ms_m, int4_bytes);
      if (M > 32) add("int4 dequantize + cuBLASLt", ms_d, int4_bytes);
      add("bf16 linear", ms_b, bf16_bytes);
      b.free(x);
      b.free(o);
    }
    b.free(deq);
    cudaFree(cg);
    for (Packed& p : pk) {
      cudaFree(p.q);
      cudaFree(p.sc);
      cudaFree(p.z);
    }
    for (auto& w : wb) b.free(w);
  }
  std::printf("device-to-device copy bandwidth: %.0f GB/s\n", copy_gbs);
  std::printf(
      "times per launch: %d back-to-back launches (rotating weight copies) in one CUDA graph, "
      "median of 20 replays%s\n",
      kPerGraph, graphed ? "" : " (some calls could not be captured: timed one launch at a time)");
}

}  // namespace pagoda::bench
