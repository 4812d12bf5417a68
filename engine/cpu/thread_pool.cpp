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

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lk) {
  while (next_chunk_ < num_chunks_) {
    const int64_t c = next_chunk_++;
    const auto* body = body_;
    const bool skip = error_ != nullptr;  // a chunk failed: drain the rest unrun
    const int64_t b = c * chunk_, e = std::min(n_, b + chunk_);
    lk.unlock();
    std::exception_ptr err;
    if (!skip) {
      try {
        (*body)(b, e);
      } catch (...) {
        err = std::current_exception();
      }
    }
    lk.lock();
    if (err && !error_) error_ = err;
    if (++done_chunks_ == num_chunks_) done_cv_.notify_one();
  }
}

void ThreadPool::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    start_cv_.wait(lk, [&] { return stop_ || next_chunk_ < num_chunks_; });
    if (stop_) return;
    run_chunks(lk);
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
  std::unique_lock<std::mutex> lk(mu_);
  body_ = &body;
  n_ = n;
  chunk_ = (n + max_chunks - 1) / max_chunks;
  num_chunks_ = (n + chunk_ - 1) / chunk_;
  next_chunk_ = done_chunks_ = 0;
  error_ = nullptr;
  start_cv_.notify_all();
  run_chunks(lk);
  done_cv_.wait(lk, [&] { return done_chunks_ == num_chunks_; });
  body_ = nullptr;
  n_ = num_chunks_ = next_chunk_ = done_chunks_ = 0;
  std::exception_ptr err = error_;
  error_ = nullptr;
  lk.unlock();
  if (err) std::rethrow_exception(err);
}

}  // namespace pagoda::cpu
