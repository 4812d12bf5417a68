// RankThreads (engine/dist/rank_threads.h): a generation counter hands each
// job to every rank thread; the last one to finish wakes the caller.
#include "engine/dist/rank_threads.h"

#include <stdexcept>
#include <string>

namespace pagoda {

RankThreads::RankThreads(int num_ranks, std::function<void(int)> init, std::function<void()> on_error)
    : num_ranks_(num_ranks), init_(std::move(init)), on_error_(std::move(on_error)) {
  if (num_ranks < 1) throw std::invalid_argument("RankThreads: need at least one rank, got " + std::to_string(num_ranks));
  if (num_ranks == 1) {
    if (init_) init_(0);
    return;
  }
  threads_.reserve(static_cast<size_t>(num_ranks));
  for (int r = 0; r < num_ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::run(const std::function<void(int)>& fn) {
  if (num_ranks_ == 1) {
    fn(0);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  pending_ = num_ranks_;
  error_ = nullptr;
  ++generation_;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void RankThreads::loop(int rank) {
  std::exception_ptr init_error;
  if (init_) {
    try {
      init_(rank);
    } catch (...) {
      init_error = std::current_exception();  // reported by every job this rank gets
    }
  }
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err = init_error;
    if (!err) {
      try {
        (*job)(rank);
      } catch (...) {
        err = std::current_exception();
      }
    }
    if (err) {
      {
        // Recorded before on_error_ aborts the others, so the root cause
        // (not a rank's "group aborted") is what run() rethrows.
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = err;
      }
      if (on_error_) on_error_();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace pagoda
