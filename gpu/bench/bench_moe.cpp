#include "gpu/bench/bench_moe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/bench/bench_decode_table.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/moe_kernels.h"

namespace pagoda::bench {

void bench_moe(std::vector<Row>& rows) {
  auto backend = make_cuda_backend(0, DType::BF16);
  auto& b = dynamic_cast<cuda::CudaBackend&>(*backend);
  const cudaStream_t st = b.stream();
  const double copy_gbs = measure_copy_gbs();
  rows.push_back({"ceiling: D2D copy 1 GiB", 0, fmt("%.0f GB/s", copy_gbs), "read+write bytes"});
  constexpr int64_t E = 8, k = 2, H = 4096, I = 14336, kMaxT = 256;
  // Every call reads its experts' weights from DRAM: one expert's gate_up
  // (235 MB) or down (117 MB) is several times the 60 MB L2.
  Tensor gate_up = b.alloc(DType::BF16, {E, 2 * I, H}), down = b.alloc(DType::BF16, {E, H, I});
  b.fill_normal(gate_up, 0, 0.02f, 1);
  b.fill_normal(down, 0, 0.02f, 2);
  Tensor x = b.alloc(DType::BF16, {kMaxT * k, I});  // gate_up reads its first T rows of H
  b.fill_normal(x, 0, 1, 3);
  Tensor out = b.alloc(DType::BF16, {kMaxT * k, 2 * I});
  const int64_t max_slots = kMaxT * k;
  // Scratch for the larger of the two tilings (16- and 64-row tiles).
  const int64_t max_tiles_cap =
      std::max(cuda::moe_max_tiles(max_slots, E, 16), cuda::moe_max_tiles(max_slots, E, 64));
  const int64_t max_sorted = std::max(cuda::moe_max_tiles(max_slots, E, 16) * 16,
                                      cuda::moe_max_tiles(max_slots, E, 64) * 64);
  int32_t* d = nullptr;
  const int64_t ints = max_slots + max_sorted + max_tiles_cap + 1 + cuda::moe_align_scratch_ints(E);
  PAGODA_CUDA_CHECK(cudaMalloc(&d, static_cast<size_t>(ints) * 4));
  int32_t* ids = d;
  int32_t* sorted = ids + max_slots;
  int32_t* tile_expert = sorted + max_sorted;
  int32_t* num_tiles = tile_expert + max_tiles_cap;
  int32_t* counts = num_tiles + 1;

  for (const int64_t T : {1, 2, 4, 8, 12, 16, 32, 64, 128, 256}) {
    const bool gemv = T <= 16;  // beyond that only the grouped GEMM, at the op's tile size
    const int64_t tile_rows = gemv ? 16 : cuda::moe_tile_rows(T, E, k);
    // A fixed random routing: two distinct experts a token.
    std::mt19937 rng(static_cast<unsigned>(1000 + T));
    std::vector<int32_t> h(static_cast<size_t>(T * k));
    std::vector<int> per(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t) {
      const auto e0 = static_cast<int32_t>(rng() % static_cast<unsigned>(E));
      auto e1 = static_cast<int32_t>(rng() % static_cast<unsigned>(E - 1));
      if (e1 >= e0) ++e1;
      h[static_cast<size_t>(t * k)] = e0;
      h[static_cast<size_t>(t * k + 1)] = e1;
      ++per[static_cast<size_t>(e0)];
      ++per[static_cast<size_t>(e1)];
    }
    const int64_t used = std::count_if(per.begin(), per.end(), [](int c) { return c > 0; });
    const int most = *std::max_element(per.begin(), per.end());
    PAGODA_CUDA_CHECK(
        cudaMemcpy(ids, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    const int64_t slots = T * k;
    const int64_t max_tiles = cuda::moe_max_tiles(slots, E, static_cast<int>(tile_rows));
    cuda::launch_moe_align(ids, slots, E, static_cast<int>(tile_rows), max_tiles, sorted,
                           tile_expert, num_tiles, counts, st);
    struct Lin {
      const char* name;
      const Tensor* w;
      int64_t a_div, N, K;
    };
    for (const Lin& l : {Lin{"gate_up", &gate_up, k, 2 * I, H}, Lin{"down", &down, 1, H, I}}) {
      const auto bytes = static_cast<double>(used * l.N * l.K * 2);
      const auto add = [&](const char* kernel, double ms) {
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        char name[200];
        std::snprintf(name, sizeof(name),
                      "moe %s T=%lld (%lld experts, <= %d slots each) N=%lld K=%lld: %s", l.name,
                      static_cast<long long>(T), static_cast<long long>(used), most,
                      static_cast<long long>(l.N), static_cast<long long>(l.K), kernel);
        rows.push_back({name, ms, fmt("%.0f GB/s", gbs),
                        fmt("%.0f%% of the copy bandwidth", 100.0 * gbs / copy_gbs)});
      };
      const double ms_v =
          !gemv ? 0.0
                : time_ms(
                      st,
                      [&](int) {
                        if (!cuda::launch_moe_gemv(DType::BF16, x.data, l.a_div, l.w->data,
                                                   out.data, sorted, tile_expert, num_tiles,
                                                   max_tiles, static_cast<int>(tile_rows), slots, T,
                                                   l.N, l.K, st))
                          throw std::runtime_error("launch_moe_gemv declined");
                      },
                      50, 5);
      const double ms_m = time_ms(
          st,
          [&](int) {
            cuda::launch_moe_gemm_mma(DType::BF16, x.data, l.a_div, l.w->data, out.data, sorted,
                                      tile_expert, num_tiles, max_tiles,
                                      static_cast<int>(tile_rows), slots, l.N, l.K, st);
          },
          50, 5);
      if (gemv) add("expert GEMV", ms_v);
      const std::string mk = "grouped GEMM (mma, " + std::to_string(tile_rows) + "-row tiles)";
      add(mk.c_str(), ms_m);
      if (!gemv) {  // the matrix rate too: 2 * slots * N * K
        const double tf = 2.0 * static_cast<double>(slots * l.N * l.K) / (ms_m * 1e-3) / 1e12;
        rows.push_back(
            {"  (same) " + std::string(l.name) + " T=" + std::to_string(T) + " matrix rate", ms_m,
             fmt("%.0f TFLOP/s", tf), "useful rows only"});
      }
    }
  }
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(st));
  cudaFree(d);
  for (Tensor* t : {&gate_up, &down, &x, &out}) b.free(*t);
}

}  // namespace pagoda::bench
