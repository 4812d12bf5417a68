#include "engine/guided/mask_precompute.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stop_token>
#include <thread>

namespace pagoda::guided {

// One MaskFill's states, claimed one at a time by whoever runs it (the
// workers and the waiting thread).
struct MaskFillJob {
  std::vector<std::pair<const Guide*, int32_t>> states;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::exception_ptr error;

  void work() {
    for (size_t i; (i = next.fetch_add(1)) < states.size();) {
      std::exception_ptr e;
      try {
        states[i].first->precompute(states[i].second);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (e && !error) error = e;
      if (++done == states.size()) cv.notify_all();
    }
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return done == states.size(); });
  }
};

namespace {

class MaskWorkers {
 public:
  MaskWorkers() {
    for (int i = 0; i < num_mask_workers(); ++i)
      threads_.emplace_back([this](std::stop_token st) { run(st); });
  }
  ~MaskWorkers() {
    for (std::jthread& t : threads_) t.request_stop();
    cv_.notify_all();
  }  // the jthreads join

  void submit(const std::shared_ptr<const Guide>& g, int32_t begin, int32_t end) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Task{g, begin, end, nullptr});
    }
    cv_.notify_one();
  }
  // `copies` tasks that each work on `job`, ahead of the queue.
  void submit_front(const std::shared_ptr<MaskFillJob>& job, size_t copies) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < copies; ++i) queue_.push_front(Task{{}, 0, 0, job});
    }
    cv_.notify_all();
  }

 private:
  struct Task {
    std::weak_ptr<const Guide> guide;
    int32_t begin = 0, end = 0;
    std::shared_ptr<MaskFillJob> job;
  };

  void run(std::stop_token st) {
    while (true) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait(lock, st, [this] { return !queue_.empty(); })) return;
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      if (t.job) {
        t.job->work();
        continue;
      }
      // Nothing may escape this thread (std::terminate): a fill that
      // fails here (std::bad_alloc under a memory limit) is dropped, and the
      // engine fills that mask itself when it needs it.
      try {
        for (int32_t s = t.begin; s < t.end && !st.stop_requested(); ++s) {
          const std::shared_ptr<const Guide> g = t.guide.lock();
          if (!g) break;
          g->precompute(s);
        }
      } catch (...) {
      }
    }
  }

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Task> queue_;
  std::vector<std::jthread> threads_;  // last: joined before the queue goes
};

MaskWorkers& workers() {
  static MaskWorkers w;
  return w;
}

}  // namespace

int num_mask_workers() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp(hw / 2, 1u, 8u));
}

void precompute_masks(const std::shared_ptr<const Guide>& guide) {
  if (!guide) return;
  const auto n = static_cast<int32_t>(guide->num_states());
  if (n <= 0 || static_cast<size_t>(n) > kPrecomputeMaxStates) return;
  constexpr int32_t kChunk = 16;  // states per task: the workers share a guide
  for (int32_t b = 0; b < n; b += kChunk) workers().submit(guide, b, std::min(n, b + kChunk));
}

MaskFill::MaskFill(const std::vector<std::pair<const Guide*, int32_t>>& states)
    : job_(std::make_shared<MaskFillJob>()) {
  for (const auto& [g, s] : states)
    if (g && !g->has_mask(s) &&
        std::find(job_->states.begin(), job_->states.end(), std::make_pair(g, s)) ==
            job_->states.end())
      job_->states.emplace_back(g, s);
  if (!job_->states.empty())
    workers().submit_front(job_,
                           std::min(job_->states.size(), static_cast<size_t>(num_mask_workers())));
}

MaskFill::~MaskFill() {
  if (waited_ || job_->states.empty()) return;
  job_->work();
  job_->wait();
}

void MaskFill::wait() {
  waited_ = true;
  if (job_->states.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  job_->work();
  job_->wait();
  add_mask_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (job_->error) std::rethrow_exception(job_->error);
}

void fill_masks(const std::vector<std::pair<const Guide*, int32_t>>& states) {
  MaskFill(states).wait();
}

}  // namespace pagoda::guided
