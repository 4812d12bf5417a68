#include "server/connection_drain.h"

#include <vector>

namespace pagoda {

uint64_t ConnectionDrain::add(std::function<void()> closer) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t token = next_++;
  if (draining_) {
    closers_.emplace(token, nullptr);
    lock.unlock();
    closer();
    return token;
  }
  closers_.emplace(token, std::move(closer));
  return token;
}

void ConnectionDrain::remove(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closers_.erase(token) > 0 && closers_.empty()) cv_.notify_all();
}

bool ConnectionDrain::draining() const {
  std::lock_guard<std::mutex> lock(mu_);
  return draining_;
}

void ConnectionDrain::begin() {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return;
    draining_ = true;
    for (auto& [token, closer] : closers_)
      if (closer) run.push_back(std::move(closer));
  }
  for (auto& c : run) c();
}

size_t ConnectionDrain::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return closers_.empty(); });
  return closers_.size();
}

}  // namespace pagoda
