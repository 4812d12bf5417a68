// pdl_enabled (gpu/pdl.h).
#include <array>
#include <atomic>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/pdl.h"

namespace pagoda::cuda {
namespace {

// Compiled like every kernel of this library: its PTX version says whether
// griddepcontrol was compiled in (__CUDA_ARCH__ >= 900) or left out (a
// build for an older virtual architecture that the driver JIT-compiles).
__global__ void pdl_probe_kernel() {}

}  // namespace

bool pdl_enabled() {
  static const bool off = bench_switch("PAGODA_PDL") == "0";
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
    cudaFuncAttributes fa{};
    PAGODA_CUDA_CHECK(cudaFuncGetAttributes(&fa, pdl_probe_kernel));
    k = major >= 9 && fa.ptxVersion >= 90 ? 2 : 1;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

}  // namespace pagoda::cuda
