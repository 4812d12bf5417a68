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
  // The kernel for a product of M rows (bf16/f16; F32 always goes to
  // cuBLASLt), chosen per shape from the table measured on the H200 with
  // graph-timed back-to-back launches over rotating weight copies
  // (pagoda_gpu_bench --only skinny, Llama-2-7B's and Qwen2-7B's linears;
  // docs/PERFORMANCE.md, 2026-12-04, seventeenth session). Up to 16 rows:
  // the streaming skinny tensor-core GEMM (skinny_gemm.cu) for square
  // linears (o_proj: 54-69% of copy bandwidth, cuBLASLt 55-65%) and, to 8
  // rows, for N < K (down_proj: 78-86%, level with cuBLASLt, which is
  // ahead from 12 rows); the CUDA-core GEMV (gemv.cu) at M = 1 where N >=
  // 4K (gate_up, lm_head: 94-100%, level with cuBLASLt); cuBLASLt for the
  // rest (qkv at every M: 72-92% against the GEMV's 60-84% and the skinny
  // kernel's 56-82%). Beyond 16 rows cuBLASLt.
  // Benchmarks and tests force one kernel with set_small_m.
  enum class SmallM { kAuto, kGemv, kSkinny, kCublas };
  static SmallM auto_kernel(int64_t M, int64_t N, int64_t K);
  void set_small_m(SmallM k) { small_m_ = k; }

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
  SmallM small_m_ = SmallM::kAuto;
};

}  // namespace pagoda::cuda
