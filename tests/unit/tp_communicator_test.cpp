// The in-process CPU all-reduce (engine/dist/communicator.h) and the rank
// threads (engine/dist/rank_threads.h): sums in rank order on every rank,
// sizes not divisible by the world size, reproducibility, and a failing rank
// that aborts the others instead of leaving them blocked.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/dist/rank_threads.h"

namespace pagoda {
namespace {

TEST(TpCommunicator, AllReduceSumsOnEveryRank) {
  for (int n : {1, 2, 3, 4}) {
    auto comms = make_cpu_communicators(n);
    RankThreads threads(n);
    const int64_t len = 13;  // not a multiple of 2, 3 or 4
    std::vector<std::vector<float>> data(static_cast<size_t>(n), std::vector<float>(len));
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < len; ++i) data[static_cast<size_t>(r)][static_cast<size_t>(i)] = static_cast<float>((r + 1) * 100 + i);
    threads.run([&](int r) {
      EXPECT_EQ(comms[static_cast<size_t>(r)]->rank(), r);
      EXPECT_EQ(comms[static_cast<size_t>(r)]->world_size(), n);
      Tensor t(data[static_cast<size_t>(r)].data(), DType::F32, Device::CPU, {len});
      for (int k = 0; k < 3; ++k) {  // repeated calls reuse the group
        if (k > 0) for (int64_t i = 0; i < len; ++i) t.ptr<float>()[i] = static_cast<float>((r + 1) * 100 + i);
        comms[static_cast<size_t>(r)]->all_reduce_sum(t);
      }
    });
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < len; ++i)
        EXPECT_EQ(data[static_cast<size_t>(r)][static_cast<size_t>(i)], static_cast<float>(100 * n * (n + 1) / 2 + n * i))
            << "n " << n << " rank " << r << " elem " << i;
  }
}

// Values whose fp32 sum depends on the order: the result is the rank-order
// sum ((x0 + x1) + x2), on every rank, every time.
TEST(TpCommunicator, RankOrderSumIsReproducible) {
  const float x[3] = {1.0f, 1e8f, -1e8f};
  const float want = (x[0] + x[1]) + x[2];  // 0 in fp32 (the 1 is lost), unlike x0 + (x1 + x2) == 1
  ASSERT_EQ(want, 0.0f);
  ASSERT_EQ(x[0] + (x[1] + x[2]), 1.0f);
  auto comms = make_cpu_communicators(3);
  RankThreads threads(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<float> v(3 * 64);
    threads.run([&](int r) {
      for (int i = 0; i < 64; ++i) v[static_cast<size_t>(r * 64 + i)] = x[r];
      Tensor t(v.data() + r * 64, DType::F32, Device::CPU, {64});
      comms[static_cast<size_t>(r)]->all_reduce_sum(t);
    });
    for (float f : v) ASSERT_EQ(f, want);
  }
}

TEST(TpCommunicator, FailingRankAbortsTheOthers) {
  auto comms = make_cpu_communicators(3);
  RankThreads threads(3, {}, [&] {
    for (auto& c : comms) c->abort();
  });
  std::vector<float> v(3 * 4, 1.0f);
  try {
    threads.run([&](int r) {
      if (r == 1) throw std::runtime_error("rank 1 failed");
      Tensor t(v.data() + r * 4, DType::F32, Device::CPU, {4});
      comms[static_cast<size_t>(r)]->all_reduce_sum(t);  // would wait for rank 1 forever
    });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 failed");  // the root cause, not "aborted"
  }
  // The group stays aborted: later collectives fail at once.
  Tensor t(v.data(), DType::F32, Device::CPU, {4});
  EXPECT_THROW(comms[0]->all_reduce_sum(t), std::runtime_error);
}

TEST(TpCommunicator, BadArguments) {
  EXPECT_THROW(make_cpu_communicators(0), std::invalid_argument);
  EXPECT_THROW(RankThreads(0), std::invalid_argument);
  auto comms = make_cpu_communicators(1);
  int32_t i = 0;
  Tensor t(&i, DType::I32, Device::CPU, {1});
  EXPECT_THROW(comms[0]->all_reduce_sum(t), std::invalid_argument);
}

TEST(TpRankThreads, EachRankRunsOnItsOwnThread) {
  std::vector<std::thread::id> init_ids(3), run_ids(3);
  RankThreads threads(3, [&](int r) { init_ids[static_cast<size_t>(r)] = std::this_thread::get_id(); });
  threads.run([&](int r) { run_ids[static_cast<size_t>(r)] = std::this_thread::get_id(); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(init_ids[static_cast<size_t>(r)], run_ids[static_cast<size_t>(r)]) << r;
    EXPECT_NE(run_ids[static_cast<size_t>(r)], std::this_thread::get_id()) << r;
  }
  // One rank: inline on the caller.
  RankThreads one(1);
  std::thread::id id;
  one.run([&](int) { id = std::this_thread::get_id(); });
  EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace pagoda
