// The engine thread: requests from several threads at once, idle sleep and
// wake-up, stop() with unfinished requests. Synchronises on OutputChannels.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "engine_test_fakes.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

using testing::FakeExecutor;
using testing::FakeTokenizer;
using testing::reference_greedy;

constexpr int64_t kVocab = 40;

std::vector<int32_t> prompt_for(int t, int i) {
  std::vector<int32_t> p = {1};
  for (int j = 0; j < 4 + i; ++j)
    p.push_back(5 + static_cast<int32_t>(testing::mix64(static_cast<uint64_t>(t * 100 + i * 10 + j)) % (kVocab - 5)));
  return p;
}

std::unique_ptr<Engine> make_engine(int64_t num_blocks, int64_t max_model_len = 2048) {
  EngineConfig cfg;
  cfg.max_model_len = max_model_len;
  cfg.eos_token_ids = {2};
  cfg.log_stats = false;
  return std::make_unique<Engine>(cfg, std::make_unique<FakeExecutor>(kVocab, num_blocks, 4),
                                  std::make_shared<FakeTokenizer>(kVocab));
}

using test::add_greedy_request;  // greedy, ignore_eos

TEST(EngineThread, RequestsFromSeveralThreadsAllCompleteCorrectly) {
  auto engine = make_engine(40);  // small enough to make some wait
  engine->start();
  std::vector<std::thread> clients;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      std::vector<std::shared_ptr<OutputChannel>> chans;
      for (int i = 0; i < 4; ++i)
        chans.push_back(
            add_greedy_request(*engine, fmt::format("t{}-{}", t, i), prompt_for(t, i), 8 + i));
      for (int i = 0; i < 4; ++i) {
        RequestOutput got = collect(*chans[static_cast<size_t>(i)]);
        if (got.token_ids != reference_greedy(prompt_for(t, i), 8 + i, kVocab)) failures[static_cast<size_t>(t)]++;
      }
    });
  }
  for (auto& c : clients) c.join();
  for (int f : failures) EXPECT_EQ(f, 0);
  // The engine went idle and wakes for a later request.
  RequestOutput late = collect(*add_greedy_request(*engine, "late", prompt_for(9, 1), 5));
  EXPECT_EQ(late.token_ids, reference_greedy(prompt_for(9, 1), 5, kVocab));
  engine->stop();
  EngineStats st = engine->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.requests_finished_total["length"], 17);
  EXPECT_GT(st.steps_total, 0);
}

TEST(EngineThread, StopAbortsUnfinishedRequests) {
  // 90000 tokens: the fake model's step k reads all k cached tokens, so this
  // cannot finish in the moment between its first token and stop().
  auto engine = make_engine(25000, 100000);
  engine->start();
  auto ch = add_greedy_request(*engine, "long", prompt_for(1, 1), 90000);
  // Wait for the first token so the request is surely running.
  std::vector<RequestOutput> first;
  while (first.empty()) first = ch->wait(std::chrono::milliseconds(1000));
  engine->stop();
  ASSERT_FALSE(first.back().finished);
  RequestOutput rest = collect(*ch);
  EXPECT_EQ(rest.finish_reason, FinishReason::kAbort);
  EXPECT_LT(rest.completion_tokens, 90000);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  // Restartable.
  engine->start();
  RequestOutput again = collect(*add_greedy_request(*engine, "again", prompt_for(2, 2), 3));
  EXPECT_EQ(again.token_ids, reference_greedy(prompt_for(2, 2), 3, kVocab));
}

TEST(EngineThread, DestructorWithoutStopFinishesQueuedRequests) {
  std::shared_ptr<OutputChannel> ch;
  {
    auto engine = make_engine(64);
    ch = add_greedy_request(*engine, "never-stepped", prompt_for(3, 3), 5);
  }
  ASSERT_TRUE(ch->finished());
  RequestOutput r = collect(*ch);
  EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
}

}  // namespace
}  // namespace pagoda
