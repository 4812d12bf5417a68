// RankThreads: one persistent thread per tensor-parallel rank
// (engine/dist/communicator.h says why threads, not processes). run(fn)
// calls fn(rank) on every rank's own thread at once and returns when all
// have finished; a rank's thread stays the same for the executor's life, so
// per-thread state (the CUDA current device, NCCL's per-thread launches,
// CUDA-graph capture in thread-local mode) stays put.
//
// With one rank, run() calls fn(0) on the caller's thread: no thread, no
// hand-off, TP=1 behaves exactly as before.
//
// Errors: the first exception any rank throws is rethrown by run() once
// every rank has returned; `on_error` (e.g. Communicator::abort) is called
// as soon as a rank fails so that ranks blocked in a collective waiting for
// it give up instead of hanging.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

class RankThreads {
 public:
  // init(rank) runs first on each rank's thread (e.g. cudaSetDevice(rank)).
  explicit RankThreads(int num_ranks, std::function<void(int)> init = {},
                       std::function<void()> on_error = {});
  ~RankThreads();  // joins the threads
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int num_ranks() const { return num_ranks_; }
  // Runs fn(rank) for every rank in parallel; rethrows the first failure.
  // One run at a time (callers serialize: the engine thread).
  void run(const std::function<void(int)>& fn);

 private:
  void loop(int rank);
  const int num_ranks_;
  std::function<void(int)> init_;
  std::function<void()> on_error_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda
