#include "loadtest/bench/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <memory>
#include <random>

#include "loadtest/bench/arrival.h"
#include "loadtest/bench/progress.h"

namespace pagoda::bench {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// An asyncio.Semaphore for one thread: acquire() waits while `limit` holders
// run; release() hands the slot to the longest waiter (FIFO).
class Limiter {
 public:
  explicit Limiter(int64_t limit) : free_(limit) {}
  net::awaitable<void> acquire() {
    if (free_ > 0) {
      --free_;
      co_return;
    }
    auto timer = std::make_shared<net::steady_timer>(co_await net::this_coro::executor,
                                                     Clock::time_point::max());
    waiters_.push_back(timer);
    // Woken by release() cancelling the timer: the slot is ours.
    co_await timer->async_wait(net::as_tuple(net::use_awaitable));
  }
  void release() {
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    waiters_.front()->cancel();
    waiters_.pop_front();
  }

 private:
  int64_t free_;
  std::deque<std::shared_ptr<net::steady_timer>> waiters_;
};

std::string ws_id_prefix() {
  std::random_device rd;
  return fmt::format("bench-{:08x}", rd());
}

}  // namespace

RunOutput run_benchmark(const std::vector<SampleRequest>& samples, const RunConfig& cfg) {
  RunOutput out;
  out.results.resize(samples.size());
  const std::vector<double> times =
      arrival_times(samples.size(), cfg.request_rate, cfg.burstiness, cfg.seed);
  net::io_context ioc(1);
  ProgressBar bar(static_cast<int64_t>(samples.size()), cfg.progress);
  Limiter limiter(cfg.max_concurrency > 0 ? cfg.max_concurrency : INT64_MAX);
  const std::string prefix = ws_id_prefix();
  const Clock::time_point origin = Clock::now();
  auto one = [&](size_t i) -> net::awaitable<void> {
    co_await limiter.acquire();
    out.results[i] = co_await run_request(cfg.backend, cfg.endpoint, samples[i], cfg.options,
                                          origin, fmt::format("{}-{}", prefix, i));
    limiter.release();
    bar.update();
  };
  auto schedule = [&]() -> net::awaitable<void> {
    net::steady_timer timer(ioc);
    for (size_t i = 0; i < samples.size(); ++i) {
      // times[i] <= kMaxScheduleS (arrival_times), so this fits the clock.
      const auto at =
          origin + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(std::min(times[i], kMaxScheduleS)));
      if (at > Clock::now()) {
        timer.expires_at(at);
        co_await timer.async_wait(net::use_awaitable);
      }
      net::co_spawn(ioc, one(i), net::detached);
    }
  };
  net::co_spawn(ioc, schedule(), net::detached);
  ioc.run();
  out.duration_s = std::chrono::duration<double>(Clock::now() - origin).count();
  bar.close();
  return out;
}

RequestResult run_one(const SampleRequest& sample, const RunConfig& cfg) {
  net::io_context ioc(1);
  RequestResult r;
  const Clock::time_point origin = Clock::now();
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        r = co_await run_request(cfg.backend, cfg.endpoint, sample, cfg.options, origin,
                                 ws_id_prefix() + "-test");
      },
      net::detached);
  ioc.run();
  return r;
}

}  // namespace pagoda::bench
