#include "gpu/bench/bench_qgemm.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "engine/quant/quant_config.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"

namespace pagoda::bench {

void bench_qgemm(std::vector<Row>& rows) {
  auto backend = make_cuda_backend(0, DType::BF16);
  auto& b = dynamic_cast<cuda::CudaBackend&>(*backend);
  QuantConfig qc;
  qc.method = QuantMethod::GPTQ;
  qc.bits = 4;
  qc.group_size = 128;
  qc.sym = true;
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  for (const Shape& s : {Shape{"qkv", 3 * 4096, 4096}, Shape{"o_proj", 4096, 4096},
                         Shape{"gate_up", 2 * 11008, 4096}, Shape{"down", 4096, 11008}}) {
    // Weight copies rotated so each call reads its weights from memory
    // (more than the 60 MB L2 between two uses of one copy).
    const int64_t bf16_bytes = s.N * s.K * 2, int4_bytes = s.N * s.K / 2;
    const int nb = static_cast<int>(std::max<int64_t>(1, (int64_t(256) << 20) / bf16_bytes + 1));
    const int nq = static_cast<int>(std::max<int64_t>(1, (int64_t(256) << 20) / int4_bytes + 1));
    std::vector<Tensor> wb, wq;
    for (int i = 0; i < nb; ++i) {
      wb.push_back(b.alloc(DType::BF16, {s.N, s.K}));
      b.fill_normal(wb.back(), 0, 0.02f, 20 + i);
    }
    for (int i = 0; i < nq; ++i) {
      wq.push_back(b.alloc_quantized_linear(s.N, s.K, qc));
      b.fill_quantized_dummy(wq.back(), 40 + i);
    }
    for (const int64_t M : {64, 128, 256, 512, 2048}) {
      Tensor x = b.alloc(DType::BF16, {M, s.K}), o = b.alloc(DType::BF16, {M, s.N});
      b.fill_normal(x, 0, 1, 9);
      const double flops = 2.0 * M * s.N * s.K;
      const double ms_b = time_ms(
          b.stream(), [&](int i) { b.linear(x, wb[i % nb], nullptr, o); }, 30, 5);
      const double ms_q = time_ms(
          b.stream(), [&](int i) { b.linear(x, wq[i % nq], nullptr, o); }, 30, 5);
      const double tf_b = flops / (ms_b * 1e-3) / 1e12, tf_q = flops / (ms_q * 1e-3) / 1e12;
      char name[160];
      std::snprintf(name, sizeof(name),
                    "%s M=%lld N=%lld K=%lld: int4 linear (bf16 cuBLASLt %.3f ms, %.0f TFLOP/s)",
                    s.name, static_cast<long long>(M), static_cast<long long>(s.N),
                    static_cast<long long>(s.K), ms_b, tf_b);
      rows.push_back(
          {name, ms_q, fmt("%.0f TFLOP/s", tf_q), fmt("%.2fx cuBLASLt bf16", ms_b / ms_q)});
      b.free(x);
      b.free(o);
    }
    for (auto& w : wb) b.free(w);
    for (auto& w : wq) b.free(w);
  }
}

}  // namespace pagoda::bench
