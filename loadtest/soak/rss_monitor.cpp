#include "loadtest/soak/rss_monitor.h"

#include <algorithm>

#include "loadtest/common/process_stats.h"

namespace pagoda::loadtest {

void RssMonitor::start() {
  auto t0 = std::chrono::steady_clock::now();
  thread_ = std::thread([this, t0] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      auto kib = rss_kib(pid_);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      lock.lock();
      if (kib) samples_.push_back({t, *kib});
      cv_.wait_for(lock, interval_, [this] { return stopping_; });
    }
  });
}

void RssMonitor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<RssSample> RssMonitor::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

RssVerdict RssMonitor::verdict(double warmup_s) const {
  std::lock_guard lock(mu_);
  RssVerdict v;
  if (samples_.empty()) return v;
  v.first_kib = samples_.front().kib;
  v.last_kib = samples_.back().kib;
  bool before = false, after = false;
  for (const auto& s : samples_) {
    v.max_kib = std::max(v.max_kib, s.kib);
    if (s.t_s < warmup_s) {
      before = true;
      v.baseline_kib = std::max(v.baseline_kib, s.kib);
    } else {
      after = true;
      v.max_after_kib = std::max(v.max_after_kib, s.kib);
    }
  }
  v.measured = before && after && v.baseline_kib > 0;
  if (v.measured)
    v.growth = static_cast<double>(v.max_after_kib) / static_cast<double>(v.baseline_kib) - 1.0;
  return v;
}

}  // namespace pagoda::loadtest
