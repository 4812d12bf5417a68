// opt_in_dynamic_smem (gpu/smem_optin.h).
#include "gpu/smem_optin.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "gpu/cuda_check.h"

namespace pagoda::cuda {

void opt_in_dynamic_smem(const void* kernel, int bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> set;  // (kernel, device) -> bytes set
  int dev = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mu);
  int& have = set[{kernel, dev}];
  if (have >= bytes) return;
  PAGODA_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  have = bytes;
}

}  // namespace pagoda::cuda
