#include "engine/output_channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace pagoda {
namespace {

TEST(OutputChannel, CoalescesUntilDrainedAndNotifiesOncePerBatch) {
  OutputChannel ch;
  std::atomic<int> notified{0};
  ch.set_notifier([&] { notified++; });
  RequestOutput a;
  a.text = "Hel";
  ch.push(a);
  RequestOutput b;
  b.text = "lo";
  ch.push(b);
  EXPECT_EQ(notified.load(), 1);  // second push found the channel non-empty
  auto got = ch.drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text + got[1].text, "Hello");
  EXPECT_TRUE(ch.drain().empty());
  ch.push(a);
  EXPECT_EQ(notified.load(), 2);
}

TEST(OutputChannel, CollectMergesDeltasFromAnotherThread) {
  OutputChannel ch;
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) {
      RequestOutput d;
      d.token_ids = {i};
      d.text = std::to_string(i);
      d.completion_tokens = i + 1;
      d.finished = (i == 4);
      if (d.finished) d.finish_reason = FinishReason::kLength;
      ch.push(d);
    }
  });
  RequestOutput all = collect(ch);
  producer.join();
  EXPECT_EQ(all.text, "01234");
  EXPECT_EQ(all.token_ids, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(all.completion_tokens, 5);
  EXPECT_TRUE(all.finished);
  EXPECT_EQ(all.finish_reason, FinishReason::kLength);
  EXPECT_STREQ(finish_reason_str(all.finish_reason), "length");
  EXPECT_TRUE(ch.finished());
}

}  // namespace
}  // namespace pagoda
