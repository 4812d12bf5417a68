// ConnectionDrain (server/connection_drain.h): closers run once on begin(),
// a session added after begin() is told at once, wait_idle() returns when the
// last session is removed (woken by remove, from another thread) or reports
// how many are left at its deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/connection_drain.h"

namespace pagoda {
namespace {

TEST(ConnectionDrain, BeginCallsEveryRegisteredCloserOnce) {
  ConnectionDrain d;
  int a = 0, b = 0, c = 0;
  const uint64_t ta = d.add([&] { ++a; });
  d.add([&] { ++b; });
  const uint64_t tc = d.add([&] { ++c; });
  d.remove(tc);  // gone before the drain: not called
  EXPECT_FALSE(d.draining());
  d.begin();
  d.begin();  // idempotent
  EXPECT_TRUE(d.draining());
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 0);
  d.remove(ta);
  d.remove(ta);     // twice: ignored
  d.remove(12345);  // unknown: ignored
  EXPECT_EQ(d.wait_idle(std::chrono::milliseconds(0)), 1u);
}

TEST(ConnectionDrain, ASessionAddedWhileDrainingIsToldAtOnceAndCounted) {
  ConnectionDrain d;
  d.begin();
  int called = 0;
  const uint64_t t = d.add([&] { ++called; });
  EXPECT_EQ(called, 1);
  EXPECT_EQ(d.wait_idle(std::chrono::milliseconds(0)), 1u);
  d.remove(t);
  EXPECT_EQ(d.wait_idle(std::chrono::milliseconds(0)), 0u);
}

TEST(ConnectionDrain, WaitIdleWakesWhenTheLastSessionLeaves) {
  ConnectionDrain d;
  const uint64_t t1 = d.add([] {});
  const uint64_t t2 = d.add([] {});
  std::atomic<bool> closed{false};
  d.begin();
  std::thread sessions([&] {
    d.remove(t1);
    closed = true;
    d.remove(t2);
  });
  // Bounded by a minute so a lost wake-up fails instead of hanging; returns
  // as soon as both are removed.
  EXPECT_EQ(d.wait_idle(std::chrono::minutes(1)), 0u);
  EXPECT_TRUE(closed.load());
  sessions.join();
}

}  // namespace
}  // namespace pagoda
