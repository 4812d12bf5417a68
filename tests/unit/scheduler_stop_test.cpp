// Stop checks and deltas on one Sequence (stop_checker.h), fed by hand.
#include <gtest/gtest.h>

#include "engine/sched/stop_checker.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

using testing::FakeTokenizer;

struct Fixture {
  FakeTokenizer tok{40};
  GenerateRequest req;
  StopConfig cfg{100, {2}};
  std::unique_ptr<Sequence> make(SamplingParams sp, int64_t max_tokens = 50) {
    req.request_id = "x";
    req.prompt_token_ids = {1, 5, 6};
    req.sampling = sp;
    return std::make_unique<Sequence>(req, max_tokens, 0, tok);
  }
};

TEST(StopChecker, MultiByteCharacterSplitAcrossTokensIsEmittedWhole) {
  Fixture f;
  auto seq = f.make({});
  EXPECT_FALSE(append_token(*seq, 3, f.cfg));  // E2 82: incomplete
  RequestOutput d1 = make_delta(*seq);
  EXPECT_EQ(d1.text, "");
  EXPECT_EQ(d1.token_ids, std::vector<int32_t>{3});
  EXPECT_FALSE(append_token(*seq, 4, f.cfg));  // AC completes "€"
  RequestOutput d2 = make_delta(*seq);
  EXPECT_EQ(d2.text, "\xE2\x82\xAC");
  EXPECT_EQ(d2.completion_tokens, 2);
  EXPECT_EQ(d2.prompt_tokens, 3);
}

TEST(StopChecker, StopStringIsHeldBackThenCut) {
  Fixture f;
  std::string p7 = FakeTokenizer::piece(7), p8 = FakeTokenizer::piece(8), p9 = FakeTokenizer::piece(9);
  SamplingParams sp;
  sp.stop = {std::string(1, p7[1]) + p8};  // spans tokens 7 and 8
  auto seq = f.make(sp);
  EXPECT_FALSE(append_token(*seq, 9, f.cfg));
  EXPECT_FALSE(append_token(*seq, 7, f.cfg));
  // Hold-back of len(stop) - 1 = 2 bytes: p7 (which ends in the stop
  // string's first byte) is not shown yet; token ids are never held back.
  RequestOutput d = make_delta(*seq);
  EXPECT_EQ(d.text, p9);
  EXPECT_EQ(d.token_ids, (std::vector<int32_t>{9, 7}));
  EXPECT_TRUE(append_token(*seq, 8, f.cfg));
  RequestOutput last = make_delta(*seq);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last.stop_str, sp.stop[0]);
  EXPECT_EQ(d.text + last.text, p9 + p7[0]);
  EXPECT_EQ(last.token_ids, (std::vector<int32_t>{8}));
}

TEST(StopChecker, IncludeStopStrKeepsTheMatchAndHoldsNothingBack) {
  Fixture f;
  std::string p7 = FakeTokenizer::piece(7), p8 = FakeTokenizer::piece(8);
  SamplingParams sp;
  sp.stop = {std::string(1, p7[1]) + p8[0]};
  sp.include_stop_str_in_output = true;
  auto seq = f.make(sp);
  EXPECT_FALSE(append_token(*seq, 7, f.cfg));
  EXPECT_EQ(make_delta(*seq).text, p7);
  EXPECT_TRUE(append_token(*seq, 8, f.cfg));
  EXPECT_EQ(make_delta(*seq).text, p8.substr(0, 1));
}

TEST(StopChecker, LengthIsCheckedBeforeEos) {
  Fixture f;
  auto seq = f.make({}, 2);
  EXPECT_FALSE(append_token(*seq, 7, f.cfg));
  EXPECT_TRUE(append_token(*seq, 2, f.cfg));
  EXPECT_EQ(seq->finish_reason, FinishReason::kLength);
}

TEST(StopChecker, MaxModelLenCapsTheSequence) {
  Fixture f;
  f.cfg.max_model_len = 5;  // prompt 3 + 2
  auto seq = f.make({}, 50);
  EXPECT_FALSE(append_token(*seq, 7, f.cfg));
  EXPECT_TRUE(append_token(*seq, 8, f.cfg));
  EXPECT_EQ(seq->finish_reason, FinishReason::kLength);
}

TEST(StopChecker, StopTokenTextIsShownOnlyWithIncludeStopStr) {
  for (bool include : {false, true}) {
    Fixture f;
    SamplingParams sp;
    sp.stop_token_ids = {8};
    sp.include_stop_str_in_output = include;
    auto seq = f.make(sp);
    EXPECT_FALSE(append_token(*seq, 7, f.cfg));
    EXPECT_TRUE(append_token(*seq, 8, f.cfg));
    RequestOutput d = make_delta(*seq);
    EXPECT_EQ(d.stop_token_id, 8);
    EXPECT_EQ(d.text, FakeTokenizer::piece(7) + (include ? FakeTokenizer::piece(8) : ""));
  }
}

}  // namespace
}  // namespace pagoda
