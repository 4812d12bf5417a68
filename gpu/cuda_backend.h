// The CUDA backend: Backend ops as CUDA kernels of our own plus cuBLASLt
// GEMMs (bf16/fp16 in, fp32 accumulate), on one stream of one device.
// Only built when a CUDA toolkit is found (PAGODA_HAVE_CUDA).
#pragma once
#include <memory>

#include "engine/model/backend.h"

namespace pagoda {

// act_dtype: BF16, F16 or F32. Throws std::runtime_error when the device
// cannot be opened (no driver, no GPU, bad index).
std::unique_ptr<Backend> make_cuda_backend(int device_index, DType act_dtype);

}  // namespace pagoda
