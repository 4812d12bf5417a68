// NcclCommunicator (gpu/nccl_communicator.h): ncclCommInitAll for the ranks
// of one process, ncclAllReduce on each rank's stream.
#include "gpu/nccl_communicator.h"

#include <nccl.h>

#include <stdexcept>
#include <string>

#include "gpu/cuda_backend_impl.h"

namespace pagoda::cuda {
namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string("NCCL error: ") + what + " failed: " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default:
      throw std::invalid_argument(std::string("NcclCommunicator::all_reduce_sum: unsupported dtype ") +
                                  dtype_name(t));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream)
      : comm_(comm), rank_(rank), size_(size), stream_(stream) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void all_reduce_sum(Tensor& t) override {
    if (t.device != Device::CUDA) throw std::invalid_argument("NcclCommunicator::all_reduce_sum: CUDA tensor expected");
    nccl_check(ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype), ncclSum, comm_,
                             stream_),
               "ncclAllReduce");
  }

 private:
  ncclComm_t comm_;
  const int rank_, size_;
  cudaStream_t stream_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& backends) {
  const int n = static_cast<int>(backends.size());
  std::vector<int> devices;
  std::vector<cudaStream_t> streams;
  for (int r = 0; r < n; ++r) {
    auto* cb = dynamic_cast<CudaBackend*>(backends[static_cast<size_t>(r)]);
    if (!cb) throw std::invalid_argument("make_nccl_communicators: rank " + std::to_string(r) + " is not on CUDA");
    devices.push_back(r);  // rank r's backend was made on device r
    streams.push_back(cb->stream());
  }
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  nccl_check(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::make_unique<NcclCommunicator>(comms[static_cast<size_t>(r)], r, n, streams[static_cast<size_t>(r)]));
  return out;
}

}  // namespace pagoda::cuda
