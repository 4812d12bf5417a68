// CpuCommunicator: an in-process all-reduce for the CPU backend's ranks
// (engine/dist/communicator.h). Three phases per call, separated by an
// abortable barrier: (1) every rank publishes its tensor; (2) rank r sums
// elements [r*n/N, (r+1)*n/N) of all ranks' tensors, in rank order, into a
// private buffer; (3) once every rank has read every input, rank r writes its
// slice back into every rank's tensor; a last barrier makes sure no rank
// returns (and reuses its tensor) while another is still writing into it.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "engine/dist/communicator.h"

namespace pagoda {
namespace {

// std::barrier cannot be aborted; a rank that throws would leave the others
// waiting forever. This one can.
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) throw std::runtime_error("tensor-parallel group aborted: another rank failed");
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) throw std::runtime_error("tensor-parallel group aborted: another rank failed");
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

struct Group {
  explicit Group(int n) : size(n), barrier(n), tensors(static_cast<size_t>(n)) {}
  const int size;
  AbortableBarrier barrier;
  std::vector<Tensor> tensors;  // published by each rank in phase 1
};

class CpuCommunicator final : public Communicator {
 public:
  CpuCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->size; }
  void abort() override { group_->barrier.abort(); }

  void all_reduce_sum(Tensor& t) override {
    if (t.device != Device::CPU || t.dtype != DType::F32)
      throw std::invalid_argument(std::string("CpuCommunicator::all_reduce_sum: F32 CPU tensor expected, got ") +
                                  dtype_name(t.dtype));
    const int N = group_->size;
    if (N == 1) return;
    group_->tensors[static_cast<size_t>(rank_)] = t;
    group_->barrier.arrive_and_wait();
    const int64_t n = t.numel();
    for (const Tensor& o : group_->tensors)
      if (o.numel() != n) {
        abort();
        throw std::invalid_argument("CpuCommunicator::all_reduce_sum: ranks passed different sizes (" +
                                    std::to_string(n) + " vs " + std::to_string(o.numel()) + ")");
      }
    const int64_t begin = n * rank_ / N, end = n * (rank_ + 1) / N;
    partial_.assign(static_cast<size_t>(end - begin), 0.0f);
    for (int r = 0; r < N; ++r) {  // rank order: reproducible
      const float* src = group_->tensors[static_cast<size_t>(r)].ptr<float>() + begin;
      for (int64_t i = 0; i < end - begin; ++i) partial_[static_cast<size_t>(i)] += src[i];
    }
    group_->barrier.arrive_and_wait();  // everyone has read every input
    if (end > begin)
      for (int r = 0; r < N; ++r)
        std::memcpy(group_->tensors[static_cast<size_t>(r)].ptr<float>() + begin, partial_.data(),
                    partial_.size() * sizeof(float));
    group_->barrier.arrive_and_wait();  // every slice is written everywhere
  }

 private:
  std::shared_ptr<Group> group_;
  const int rank_;
  std::vector<float> partial_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int world_size) {
  if (world_size < 1)
    throw std::invalid_argument("make_cpu_communicators: world size must be >= 1, got " + std::to_string(world_size));
  auto group = std::make_shared<Group>(world_size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world_size; ++r) out.push_back(std::make_unique<CpuCommunicator>(group, r));
  return out;
}

}  // namespace pagoda
