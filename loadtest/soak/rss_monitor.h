// Samples a process's resident set size (VmRSS) on a thread every interval,
// and judges growth after a warm-up: the baseline is the largest sample taken
// during the warm-up (RSS rises while allocators and the KV cache reach their
// working size, and swings with load), the verdict compares every later
// sample with it.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda::loadtest {

struct RssSample {
  double t_s = 0;  // seconds since start()
  uint64_t kib = 0;
};

struct RssVerdict {
  bool measured = false;  // samples exist both in and after the warm-up
  uint64_t first_kib = 0, baseline_kib = 0, last_kib = 0, max_kib = 0, max_after_kib = 0;
  double growth = 0;  // max_after / baseline - 1
};

class RssMonitor {
 public:
  RssMonitor(pid_t pid, std::chrono::milliseconds interval) : pid_(pid), interval_(interval) {}
  ~RssMonitor() { stop(); }
  void start();
  void stop();
  std::vector<RssSample> samples() const;
  // Baseline = max over t < warmup_s; growth = (max over t >= warmup_s) / baseline - 1.
  RssVerdict verdict(double warmup_s) const;

 private:
  pid_t pid_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<RssSample> samples_;
  std::thread thread_;
};

}  // namespace pagoda::loadtest
