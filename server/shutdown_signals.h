// ShutdownSignals: SIGINT / SIGTERM for `pagoda serve`, handled on a thread
// of their own (sigwait) so they are seen whatever the other threads are
// doing (a network thread rendering a template, the engine thread in a long
// step): the first signal starts the graceful shutdown (wait_first()), a
// second one ends the process at once with status 128 + signal number
// (130 for SIGINT, 143 for SIGTERM), after one log line.
//
// ShutdownWatchdog: the hard bound on a shutdown: if disarm() has not been
// called within `bound` of arm(), it logs one line and ends the process at
// once with status kWatchdogExitCode, whatever any thread is doing.
//
// Construct ShutdownSignals before starting any other thread: the signals
// are blocked in the constructing thread and every thread started after it
// inherits the mask, so only the signal thread receives them.
#pragma once
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace pagoda {

inline constexpr int kWatchdogExitCode = 124;

class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();  // leaves the signal thread blocked in sigwait (detached)
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;
  // Blocks until the first SIGINT / SIGTERM; returns its number.
  int wait_first();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int first = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();  // shared with the signal thread
};

class ShutdownWatchdog {
 public:
  ShutdownWatchdog() = default;
  ~ShutdownWatchdog() { disarm(); }
  ShutdownWatchdog(const ShutdownWatchdog&) = delete;
  ShutdownWatchdog& operator=(const ShutdownWatchdog&) = delete;
  // Starts the countdown (once).
  void arm(std::chrono::milliseconds bound);
  // Stops it (the shutdown finished in time).
  void disarm();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace pagoda
