// A small fixed thread pool with a blocking parallel-for, for the CPU
// backend's row/head-parallel kernels. One parallel_for runs at a time; the
// calling thread takes part. Exceptions thrown by the body are rethrown in
// the caller (the first one).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda::cpu {

class ThreadPool {
 public:
  // num_threads counts the caller; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) over disjoint chunks covering [0, n), in
  // parallel. `grain` is the smallest chunk worth a thread (work items);
  // small n runs inline on the caller.
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& body);

 private:
  void worker_loop();
  // Claims and runs chunks of the current job until none is left.
  void run_chunks(std::unique_lock<std::mutex>& lk);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serialises parallel_for calls
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  bool stop_ = false;
  // The current job, guarded by mu_. The caller returns once every chunk is
  // done, so a worker that wakes late finds nothing left and never touches
  // a finished job's body.
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, num_chunks_ = 0;
  int64_t next_chunk_ = 0, done_chunks_ = 0;
  std::exception_ptr error_;
};

}  // namespace pagoda::cpu
