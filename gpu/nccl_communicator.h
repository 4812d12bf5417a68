// NCCL communicators for tensor parallelism on several GPUs of one host
// (engine/dist/communicator.h: one process, one thread per GPU). Built only
// when CMake finds NCCL (PAGODA_HAVE_NCCL; gpu/CMakeLists.txt).
//
// all_reduce_sum is ncclAllReduce(sum) in place on the rank backend's stream
// (asynchronous like every other op; captured into the rank's CUDA graphs).
// Dtypes: F32, F16, BF16.
#pragma once
#include <memory>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/model/backend.h"

namespace pagoda::cuda {

// One communicator per backend (rank r = backends[r], which must be the CUDA
// backend on device r), made with ncclCommInitAll from the calling thread.
// Throws std::invalid_argument for a non-CUDA backend, std::runtime_error
// naming the NCCL call and its error string when NCCL fails.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& backends);

}  // namespace pagoda::cuda
