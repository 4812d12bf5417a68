// CUDA device discovery used by `--device auto`.
#pragma once
#include <cstdint>
#include <string>

namespace pagoda::cuda {
// Number of usable CUDA devices; 0 when there is no driver or no GPU
// (never throws).
int device_count();
// "NVIDIA H200 (sm_90, 139.8 GiB)" for device `index`; "" if unavailable.
std::string device_description(int index);
// cudaDeviceProp::name ("NVIDIA H200") and totalGlobalMem (bytes) of device
// `index`, what vLLM's current_platform.get_device_name() and
// get_device_total_memory() report; false (outputs untouched) if unavailable.
bool device_name_and_memory(int index, std::string& name, uint64_t& total_bytes);
}  // namespace pagoda::cuda

namespace pagoda::cuda {
// cudaSetDevice(index) for the calling thread (a tensor-parallel rank's
// thread); throws std::runtime_error naming the device on failure.
void set_current_device(int index);
}  // namespace pagoda::cuda
