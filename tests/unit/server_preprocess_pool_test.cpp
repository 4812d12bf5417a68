// PreprocessPool: idle threads take jobs at once, max_queued more wait, the
// rest are refused; stop() drops the waiting jobs unrun (releasing what they
// hold) and lets the running one finish. Order forced with futures, no sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include "server/preprocess_pool.h"

namespace pagoda {
namespace {

TEST(PreprocessPool, RefusesBeyondIdleThreadsPlusQueue) {
  PreprocessPool pool(1, 1);
  std::promise<void> started, release;
  std::shared_future<void> release_f = release.get_future().share();
  ASSERT_TRUE(pool.try_submit([&started, release_f] {
    started.set_value();
    release_f.wait();
  }));
  started.get_future().wait();
  EXPECT_EQ(pool.running(), 1u);
  std::promise<void> second_ran;
  ASSERT_TRUE(pool.try_submit([&second_ran] { second_ran.set_value(); }));  // waits in the queue
  EXPECT_EQ(pool.queued(), 1u);
  EXPECT_FALSE(pool.try_submit([] { ADD_FAILURE() << "a refused job ran"; }));
  EXPECT_EQ(pool.refused(), 1u);
  release.set_value();
  second_ran.get_future().wait();  // FIFO: the queued job runs after the first
}

TEST(PreprocessPool, StopDropsQueuedJobsAndFinishesTheRunningOne) {
  auto pool = std::make_unique<PreprocessPool>(1, 4);
  std::promise<void> started, release;
  std::shared_future<void> release_f = release.get_future().share();
  std::atomic<bool> first_done{false};
  ASSERT_TRUE(pool->try_submit([&, release_f] {
    started.set_value();
    release_f.wait();
    first_done = true;
  }));
  started.get_future().wait();
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  ASSERT_TRUE(pool->try_submit([held] { ADD_FAILURE() << "a dropped job ran"; }));
  held.reset();
  std::thread stopper([&] { pool->stop(); });
  // stop() drops the queued job (its capture is released) before joining.
  while (!watch.expired()) std::this_thread::yield();
  EXPECT_FALSE(pool->try_submit([] {}));
  release.set_value();
  stopper.join();
  EXPECT_TRUE(first_done);
}

TEST(PreprocessPool, AThrowingJobDoesNotStopItsThread) {
  PreprocessPool pool(1, 2);
  ASSERT_TRUE(pool.try_submit([] { throw std::runtime_error("boom"); }));
  std::promise<void> ran;
  ASSERT_TRUE(pool.try_submit([&ran] { ran.set_value(); }));
  ran.get_future().wait();
}

}  // namespace
}  // namespace pagoda
