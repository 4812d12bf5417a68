// PreprocessPool: the bounded worker pool that parses, renders (chat
// templates) and tokenizes requests off the network threads, so /health,
// /metrics and every other connection stay responsive while a big request
// is being preprocessed (issue 12). A fixed number of threads
// (--preprocess-threads) take jobs from one FIFO queue of at most max_queued
// waiting jobs (--max-preprocess-queue); a job that does not fit is refused
// at once (the session answers 503 with Retry-After), never queued without
// bound.
//
// A job is a plain callable; the session posts its result back onto its
// own strand. stop() (and the destructor) refuses new jobs, destroys the
// queued ones unrun (releasing what they hold, e.g. a session), and joins
// the threads after their current job: every job is bounded (prompt length
// by max_model_len, chat messages, template time), so this takes at most a
// fraction of a second.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

class PreprocessPool {
 public:
  // threads >= 1; max_queued >= 0 jobs waiting beyond those running.
  PreprocessPool(size_t threads, size_t max_queued);
  ~PreprocessPool();
  PreprocessPool(const PreprocessPool&) = delete;
  PreprocessPool& operator=(const PreprocessPool&) = delete;

  // Queues job; false (job not kept) when every thread is busy and
  // max_queued jobs are already waiting, or the pool is stopped. Thread-safe. An exception out of a
  // job is logged and dropped (the job must report its own errors).
  bool try_submit(std::function<void()> job);
  void stop();

  size_t max_queued() const { return max_queued_; }
  size_t num_threads() const { return threads_.size(); }
  // For /metrics (pagoda:preprocess_*): jobs running and waiting now, jobs
  // refused because the queue was full, and requests whose client left
  // while they were preprocessed (dropped unsubmitted; note_dropped() is
  // called by the session).
  size_t running() const { return running_.load(); }
  size_t queued() const;
  uint64_t refused() const { return refused_.load(); }
  uint64_t dropped() const { return dropped_.load(); }
  void note_dropped() { dropped_.fetch_add(1); }
  // How long the oldest job running now has run (0 when none): /health
  // answers 503 past --engine-hang-timeout (every input is bounded, so a
  // job that long is a bug, and the pool's threads are what new requests
  // wait for).
  std::chrono::steady_clock::duration longest_running() const;

 private:
  void run(size_t index);

  const size_t max_queued_;
  std::atomic<size_t> running_{0};
  // Each thread's job start (steady_clock ticks; 0: idle), one per thread.
  std::unique_ptr<std::atomic<int64_t>[]> started_;
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> dropped_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t idle_;  // threads not running a job (under mu_)
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda
