#include "engine/cpu/thread_pool.h"

#include <algorithm>

namespace pagoda::cpu {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t c;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (next_chunk_ >= num_chunks_ || error_) return;
      c = next_chunk_++;
    }
    const int64_t b = c * chunk_, e = std::min(n_, b + chunk_);
    try {
      (*body_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--active_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = num_threads();
  if (threads == 1 || n <= grain) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  const int64_t max_chunks = std::min<int64_t>(threads * 4, (n + grain - 1) / grain);
  {
    std::lock_guard<std::mutex> lk(mu_);
    body_ = &body;
    n_ = n;
    chunk_ = (n + max_chunks - 1) / max_chunks;
    num_chunks_ = (n + chunk_ - 1) / chunk_;
    next_chunk_ = 0;
    error_ = nullptr;
    active_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  run_chunks();
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return active_ == 0; });
    body_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace pagoda::cpu
