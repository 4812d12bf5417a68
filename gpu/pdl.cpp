#include "gpu/pdl.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gpu/cuda_check.h"

namespace pagoda::cuda {

bool pdl_enabled() {
  static const bool off = [] {
    const char* v = std::getenv("PAGODA_PDL");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  if (off) return false;
  // Per device: 0 unknown, 1 no, 2 yes.
  static std::array<std::atomic<int>, 64> known{};
  int dev = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= static_cast<int>(known.size())) return false;
  int k = known[dev].load(std::memory_order_relaxed);
  if (k == 0) {
    int major = 0;
    PAGODA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    k = major >= 9 ? 2 : 1;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

}  // namespace pagoda::cuda
