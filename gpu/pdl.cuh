// Device side of programmatic dependent launch (gpu/pdl.h) and the launch
// helper. Every kernel launched through launch_pdl calls
// pdl_wait_then_release() on every path before it touches what an earlier
// kernel of the stream writes or reads (it is a no-op when the kernel was
// launched without the attribute, or on devices older than sm_90), and
// before it returns, so a kernel never completes ahead of the one it depends on and
// the dependency chain stays transitive. Internal to gpu/.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "gpu/pdl.h"

namespace pagoda::cuda {

// Blocks until the kernels this grid programmatically depends on have
// completed and their memory is visible (griddepcontrol.wait), then lets
// the next kernel of the stream (if launched with the attribute) be
// scheduled once every CTA of this grid has got here or exited
// (griddepcontrol.launch_dependents). Releasing only after the wait keeps
// at most one kernel waiting ahead of the running one.
// A PAGODA_PDL_EARLY build (CMake option, for benchmarks) releases first
// and then waits: the next kernel may then start as soon as every CTA of
// this one has started, and the one after it likewise, so several kernels
// of a decode step can be resident at once, each streaming its first
// weights (all they touch before the wait) under the running one. Still
// correct: a kernel completes only after its wait returned, so completion
// stays ordered along the chain, whichever order each kernel picks (the
// int4 linears pass kPdlEarlyReleaseQuant).
template <bool kEarly = kPdlEarlyRelease>
__device__ __forceinline__ void pdl_wait_then_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kEarly) {
    asm volatile("griddepcontrol.launch_dependents;\n" :::);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
  } else {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" :::);
  }
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with the programmatic
// stream serialization attribute where pdl_enabled(). Errors are left for
// the caller's PAGODA_CUDA_CHECK_LAUNCH (cudaGetLastError) as with <<<>>>.
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace pagoda::cuda
