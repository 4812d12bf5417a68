#include "engine/request_queue.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

namespace pagoda {
namespace {

TEST(RequestQueue, ManyProducersOneConsumerLoseNothing) {
  RequestQueue q;
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t)
    producers.emplace_back([&q, t] {
      for (int i = 0; i < kEach; ++i) {
        auto c = std::make_unique<Command>();
        c->kind = Command::Kind::kAbort;
        c->request_ids = {std::to_string(t * kEach + i)};
        q.push(std::move(c));
      }
    });
  std::set<std::string> seen;
  while (static_cast<int>(seen.size()) < kThreads * kEach) {
    uint64_t epoch = q.epoch();
    bool got = false;
    while (auto c = q.pop()) {
      seen.insert(c->request_ids.at(0));
      got = true;
    }
    if (!got) q.wait_for_change(epoch);  // sleeps until a push
  }
  for (auto& p : producers) p.join();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_TRUE(q.empty());
}

TEST(RequestQueue, DestructorReleasesQueuedCommands) {
  // Under ASan a leak here fails the run.
  RequestQueue q;
  auto c = std::make_unique<Command>();
  c->request = std::make_unique<GenerateRequest>();
  c->request->prompt_token_ids.assign(100, 1);
  q.push(std::move(c));
  EXPECT_FALSE(q.empty());
}

}  // namespace
}  // namespace pagoda
