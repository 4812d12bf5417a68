#include "server/shutdown_signals.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace pagoda {

namespace {

sigset_t shutdown_sigset() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

ShutdownSignals::ShutdownSignals() {
  sigset_t set = shutdown_sigset();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
    throw std::runtime_error("pthread_sigmask failed");
  std::thread([st = state_, set] {
    int count = 0;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (++count == 1) {
        spdlog::info("Signal {}: shutting down (a second SIGINT/SIGTERM exits at once)", sig);
        std::lock_guard<std::mutex> lock(st->mu);
        st->first = sig;
        st->cv.notify_all();
        continue;
      }
      spdlog::warn("Second signal {}: exiting now with status {}", sig, 128 + sig);
      spdlog::default_logger()->flush();
      std::fflush(stdout);
      std::_Exit(128 + sig);
    }
  }).detach();
}

ShutdownSignals::~ShutdownSignals() = default;

int ShutdownSignals::wait_first() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->first != 0; });
  return state_->first;
}

void ShutdownWatchdog::arm(std::chrono::milliseconds bound) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, bound] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, bound, [this] { return disarmed_; })) return;
    spdlog::critical(
        "Shutdown did not finish within its bound of {:.1f} s; exiting now with status {}",
        std::chrono::duration<double>(bound).count(), kWatchdogExitCode);
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    std::_Exit(kWatchdogExitCode);
  });
}

void ShutdownWatchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pagoda
