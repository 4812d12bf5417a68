// OutputChannel with n > 1 choices: finished only once every choice pushed
// its finished delta (a repeated index counts once), an error delta finishes
// it at once, and collect_all() merges each choice's deltas separately.
#include <gtest/gtest.h>

#include "engine/output_channel.h"

namespace pagoda {
namespace {

RequestOutput delta(int index, const std::string& text, bool finished, std::vector<TokenLogprob> lp = {}) {
  RequestOutput d;
  d.index = index;
  d.text = text;
  d.token_ids.assign(text.size(), 7);
  d.logprobs = std::move(lp);
  d.finished = finished;
  d.finish_reason = finished ? FinishReason::kStop : FinishReason::kNone;
  return d;
}

TEST(OutputChannelChoices, FinishedOnlyWhenEveryChoiceIs) {
  OutputChannel ch;
  ch.set_num_choices(3);
  ch.push(delta(0, "a", false));
  ch.push(delta(1, "b", true));
  EXPECT_FALSE(ch.finished());
  ch.push(delta(1, "", true));  // the same choice again: still 1 of 3
  ch.push(delta(2, "c", true));
  EXPECT_FALSE(ch.finished());
  ch.push(delta(0, "d", true));
  EXPECT_TRUE(ch.finished());
}

TEST(OutputChannelChoices, AnErrorDeltaFinishesTheChannel) {
  OutputChannel ch;
  ch.set_num_choices(2);
  RequestOutput e = delta(0, "", true);
  e.error = "bad request";
  ch.push(e);
  EXPECT_TRUE(ch.finished());
  std::vector<RequestOutput> got = collect_all(ch);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error, "bad request");
}

TEST(OutputChannelChoices, CollectAllMergesEachChoiceApart) {
  OutputChannel ch;
  ch.set_num_choices(2);
  TokenLogprob t{7, -0.5f, {}};
  ch.push(delta(1, "x", false, {t}));
  ch.push(delta(0, "He", false, {t, t}));
  ch.push(delta(1, "yz", true, {t, t}));
  RequestOutput last = delta(0, "llo", true, {t, t, t});
  last.cumulative_logprob = -2.5;
  ch.push(last);
  std::vector<RequestOutput> got = collect_all(ch);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[0].text, "Hello");
  EXPECT_EQ(got[0].logprobs.size(), 5u);
  EXPECT_EQ(got[0].cumulative_logprob, -2.5);
  EXPECT_TRUE(got[0].finished);
  EXPECT_EQ(got[1].index, 1);
  EXPECT_EQ(got[1].text, "xyz");
  EXPECT_EQ(got[1].token_ids.size(), 3u);
  EXPECT_EQ(got[1].logprobs.size(), 3u);
  EXPECT_EQ(got[1].finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace pagoda
