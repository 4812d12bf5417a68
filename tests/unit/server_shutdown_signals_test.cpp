// ShutdownSignals and ShutdownWatchdog (server/shutdown_signals.h), each in a
// forked child so that their process exits can be observed: a watchdog that
// is not disarmed ends the process with status 124 while its main thread is
// blocked for good; a disarmed one never fires; the first SIGTERM is
// delivered to wait_first() and a second one ends the process at once with
// 128 + SIGTERM, however busy (here: blocked forever) the other threads are.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "server/shutdown_signals.h"

namespace pagoda {
namespace {

[[noreturn]] void block_forever() {
  for (;;) ::pause();
}

int wait_status(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ShutdownWatchdog, FiresWith124WhenNotDisarmedWhateverTheMainThreadDoes) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ShutdownWatchdog w;
    w.arm(std::chrono::milliseconds(50));
    block_forever();  // a shutdown stuck for good
  }
  const int status = wait_status(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kWatchdogExitCode) << status;
}

TEST(ShutdownWatchdog, DisarmedInTimeNeverFires) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    {
      ShutdownWatchdog w;
      w.arm(std::chrono::hours(1));
      w.disarm();  // returns at once: the countdown thread is woken and joined
    }
    std::_Exit(7);
  }
  const int status = wait_status(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << status;
}

TEST(ShutdownSignals, FirstSignalReachesWaitFirstAndASecondExitsAtOnceWith143) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ShutdownSignals signals;
    std::thread busy(block_forever);  // another thread, never yielding to signals
    busy.detach();
    (void)!::write(fds[1], "r", 1);  // ready
    const int sig = signals.wait_first();
    const char c = sig == SIGTERM ? 'f' : 'x';
    (void)!::write(fds[1], &c, 1);
    block_forever();  // a graceful shutdown that would take forever
  }
  ::close(fds[1]);
  char c = 0;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'r');
  ::kill(pid, SIGTERM);
  ASSERT_EQ(::read(fds[0], &c, 1), 1);  // the first signal was handled
  EXPECT_EQ(c, 'f');
  ::kill(pid, SIGTERM);
  const int status = wait_status(pid);
  ::close(fds[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
}

}  // namespace
}  // namespace pagoda
