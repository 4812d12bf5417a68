// Opting a kernel in to more than 48 KB of dynamic shared memory
// (cudaFuncAttributeMaxDynamicSharedMemorySize). The attribute belongs to
// the kernel in the current device's context, so it is set once per
// (kernel, device): tensor-parallel ranks drive several devices from one
// process, each rank thread with its own current device. Internal to gpu/.
#pragma once

namespace pagoda::cuda {

// Sets the attribute of `kernel` (a __global__ function's address) to
// `bytes` on the current device unless a call for this (kernel, device)
// already set at least that much. Thread-safe; throws std::runtime_error
// (PAGODA_CUDA_CHECK) when the runtime refuses.
void opt_in_dynamic_smem(const void* kernel, int bytes);

}  // namespace pagoda::cuda
