// GpuSampler (gpu/gpu_sampler.h): parameter upload, launch, ids back.
#include "gpu/gpu_sampler.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace pagoda::cuda {

void launch_sample(const float* logits, int64_t rows, int64_t vocab, const GpuSampleParams* params,
                   int32_t* out, cudaStream_t stream);

namespace {
CudaBackend& as_cuda(Backend& b) {
  auto* c = dynamic_cast<CudaBackend*>(&b);
  if (c == nullptr) throw std::invalid_argument("GpuSampler: the backend is not the CUDA backend");
  return *c;
}
size_t bytes_for(int64_t rows) { return static_cast<size_t>(rows) * (sizeof(GpuSampleParams) + 4); }
}  // namespace

GpuSampler::GpuSampler(Backend& backend) : backend_(backend) { as_cuda(backend_); }

GpuSampler::~GpuSampler() {
  if (host_) cudaFreeHost(host_);
  if (dev_) cudaFree(dev_);
}

void GpuSampler::sample(const Tensor& logits, const std::vector<GpuSampleParams>& params,
                        std::vector<int32_t>& ids) {
  CudaBackend& cb = as_cuda(backend_);
  const int64_t n = static_cast<int64_t>(params.size());
  if (logits.device != Device::CUDA || logits.dtype != DType::F32 || logits.ndim != 2 || logits.rows() < n)
    throw std::invalid_argument("GpuSampler::sample: logits must be F32 [rows >= " + std::to_string(n) +
                                ", vocab] on the GPU, got " + logits.shape_str());
  for (const GpuSampleParams& p : params)
    if (!(p.temperature >= 0.f) || !(p.top_p > 0.f && p.top_p <= 1.f) || !(p.min_p >= 0.f && p.min_p <= 1.f))
      throw std::invalid_argument("GpuSampler::sample: temperature must be >= 0, top_p in (0, 1], min_p in [0, 1]");
  ids.resize(static_cast<size_t>(n));
  if (n == 0) return;
  if (n > cap_rows_) {
    cb.synchronize();
    if (host_) PAGODA_CUDA_CHECK(cudaFreeHost(host_));
    if (dev_) PAGODA_CUDA_CHECK(cudaFree(dev_));
    host_ = dev_ = nullptr;
    cap_rows_ = std::max<int64_t>(n, 256);
    PAGODA_CUDA_CHECK(cudaMallocHost(&host_, bytes_for(cap_rows_)));
    PAGODA_CUDA_CHECK(cudaMalloc(&dev_, bytes_for(cap_rows_)));
  }
  auto* hp = static_cast<GpuSampleParams*>(host_);
  auto* hid = reinterpret_cast<int32_t*>(hp + cap_rows_);
  auto* dp = static_cast<GpuSampleParams*>(dev_);
  auto* did = reinterpret_cast<int32_t*>(dp + cap_rows_);
  std::memcpy(hp, params.data(), static_cast<size_t>(n) * sizeof(GpuSampleParams));
  cudaStream_t st = cb.stream();
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(dp, hp, static_cast<size_t>(n) * sizeof(GpuSampleParams),
                                    cudaMemcpyHostToDevice, st));
  launch_sample(logits.ptr<float>(), n, logits.cols(), dp, did, st);
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(hid, did, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost, st));
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(st));
  std::memcpy(ids.data(), hid, static_cast<size_t>(n) * 4);
}

}  // namespace pagoda::cuda
