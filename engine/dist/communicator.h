// Communicator: the collective the tensor-parallel model needs (Megatron-LM,
// Shoeybi et al. 2019, arXiv:1909.08053, section 3): an all-reduce (sum) of
// the partial outputs of the row-parallel o_proj and down_proj, one call per
// rank with the same shape on every rank.
//
// Process model: ONE process, ONE thread per rank (engine/model/
// model_executor.cpp). Why not one process per GPU as vLLM does:
//  * the scheduler and the block manager run once, in the engine thread, and
//    every rank reads the same ForwardBatch by pointer: no step-metadata
//    broadcast, no IPC, no second copy of the request state to keep in sync;
//  * NCCL supports one thread per GPU with one communicator each
//    (ncclCommInitAll + each thread issuing its own collectives), which keeps
//    every rank's launches (and its CUDA-graph capture) on its own thread
//    without ncclGroupStart/End around a loop over devices;
//  * on the CPU backend the ranks are threads sharing memory, so the
//    all-reduce is a barrier and a sum (CpuCommunicator below).
// Multi-node would need one process per node (MPI launcher; docs/DISTRIBUTED.md).
//
// Errors: all_reduce_sum throws std::invalid_argument for a tensor on the
// wrong device/dtype, std::runtime_error when the group was aborted (another
// rank failed) or the transport fails (NCCL: naming the call).
#pragma once
#include <memory>
#include <vector>

#include "engine/core/tensor.h"

namespace pagoda {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: t = sum over ranks of every rank's t. t is on this rank's
  // backend (CPU: F32 host memory; NCCL: device memory in F32/F16/BF16,
  // reduced on the backend's stream, asynchronous like any other op), the
  // same shape on every rank. Every rank must call it, in the same order.
  virtual void all_reduce_sum(Tensor& t) = 0;
  // Makes every rank blocked in (or later entering) all_reduce_sum throw
  // instead of waiting for a rank that failed. CPU only; NCCL: no-op (a
  // failed NCCL rank cannot be recovered in-process).
  virtual void abort() {}
};

// world_size communicators for the CPU backend, sharing one in-process group
// (threads + a barrier). The sum is in rank order 0, 1, ..., N-1 for every
// element, so results are reproducible run to run and equal on all ranks;
// each rank sums a 1/N slice of the elements, then writes it to every rank.
// Throws std::invalid_argument for world_size < 1.
std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int world_size);

}  // namespace pagoda
