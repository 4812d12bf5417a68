#include "server/preprocess_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace pagoda {

PreprocessPool::PreprocessPool(size_t threads, size_t max_queued)
    : max_queued_(max_queued), started_(new std::atomic<int64_t>[threads]), idle_(threads) {
  for (size_t i = 0; i < threads; ++i) started_[i].store(0);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

std::chrono::steady_clock::duration PreprocessPool::longest_running() const {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t longest = 0;
  for (size_t i = 0; i < threads_.size(); ++i)
    if (const int64_t t = started_[i].load(); t != 0) longest = std::max(longest, now - t);
  return std::chrono::steady_clock::duration(longest);
}

PreprocessPool::~PreprocessPool() { stop(); }

bool PreprocessPool::try_submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Idle threads take a job each at once; beyond them, max_queued wait.
    if (stopped_ || queue_.size() >= max_queued_ + idle_) {
      refused_.fetch_add(1);
      return false;
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void PreprocessPool::stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  dropped.clear();  // outside the lock: destroying a job may release a session
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void PreprocessPool::run(size_t index) {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped
      job = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
      running_.fetch_add(1);
    }
    started_[index].store(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      job();
    } catch (const std::exception& e) {
      spdlog::error("preprocessing job failed: {}", e.what());
    } catch (...) {
      spdlog::error("preprocessing job failed");
    }
    job = nullptr;  // what it holds is released before it stops counting
    started_[index].store(0);
    running_.fetch_sub(1);
    std::lock_guard<std::mutex> lock(mu_);
    ++idle_;
  }
}

size_t PreprocessPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace pagoda
