// Error checking for CUDA runtime and cuBLASLt calls (internal to gpu/).
// Every failure throws std::runtime_error naming the call, file and line.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace pagoda::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* what, const char* file,
                                          int line) {
  throw std::runtime_error(std::string("CUDA error: ") + what + " failed at " + file + ":" +
                           std::to_string(line) + ": " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t s, const char* what, const char* file,
                                            int line) {
  throw std::runtime_error(std::string("cuBLASLt error: ") + what + " failed at " + file + ":" +
                           std::to_string(line) + ": status " + std::to_string(static_cast<int>(s)));
}

}  // namespace pagoda::cuda

#define PAGODA_CUDA_CHECK(call)                                                   \
  do {                                                                           \
    cudaError_t pagoda_err_ = (call);                                            \
    if (pagoda_err_ != cudaSuccess)                                              \
      ::pagoda::cuda::throw_cuda_error(pagoda_err_, #call, __FILE__, __LINE__);  \
  } while (0)

// After a kernel launch: catches bad launch configurations at once.
#define PAGODA_CUDA_CHECK_LAUNCH(name)                                           \
  do {                                                                           \
    cudaError_t pagoda_err_ = cudaGetLastError();                                \
    if (pagoda_err_ != cudaSuccess)                                              \
      ::pagoda::cuda::throw_cuda_error(pagoda_err_, name, __FILE__, __LINE__);   \
  } while (0)

#define PAGODA_CUBLAS_CHECK(call)                                                  \
  do {                                                                            \
    cublasStatus_t pagoda_st_ = (call);                                           \
    if (pagoda_st_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::pagoda::cuda::throw_cublas_error(pagoda_st_, #call, __FILE__, __LINE__);  \
  } while (0)
