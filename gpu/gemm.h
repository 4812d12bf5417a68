// cuBLASLt GEMM for Backend::linear (internal to gpu/): out[M, N] =
// x[M, K] · w[N, K]ᵀ (+ bias[N]), row-major, fp32 accumulation (compute type
// CUBLAS_COMPUTE_32F: true fp32 for F32 inputs, no TF32). Inputs BF16/F16/F32;
// out is the input dtype or F32. Heuristic choices are cached per shape,
// dtype and pointer alignment.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "engine/core/tensor.h"

namespace pagoda::cuda {

class LtGemm {
 public:
  explicit LtGemm(cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // bias may be null. The bias is fused as the cuBLASLt BIAS epilogue when
  // its dtype equals out_dt, otherwise added by a separate kernel.
  void run(DType in_dt, DType out_dt, const void* x, const void* w, const void* bias,
           DType bias_dt, void* out, int64_t M, int64_t N, int64_t K);
  // M <= 8 with bf16/f16 goes to gpu/gemv.cu unless disabled (benchmarks
  // compare both).
  void set_use_gemv(bool on) { use_gemv_ = on; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int, int>;
  Plan& plan(const Key& key);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
  std::map<Key, Plan> plans_;
  bool use_gemv_ = true;
};

}  // namespace pagoda::cuda
