#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "gpu/device_info.h"

namespace pagoda::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "";
  char mem[32];
  std::snprintf(mem, sizeof(mem), "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + mem + ")";
}

bool device_name_and_memory(int index, std::string& name, uint64_t& total_bytes) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  name = prop.name;
  total_bytes = prop.totalGlobalMem;
  return true;
}

void set_current_device(int index) {
  const cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess)
    throw std::runtime_error("cudaSetDevice(" + std::to_string(index) + ") failed: " + cudaGetErrorString(e));
}

}  // namespace pagoda::cuda
