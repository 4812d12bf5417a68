// Token-level stops (stop_checker.h) and the OutputProcessor's text, stop
// strings and deltas (output_processor.h) on one request, fed by hand as the
// Scheduler feeds them: append_token, then token_update's update routed
// through the processor.
#include "engine/output_processor.h"

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
  OutputProcessor outputs{tok};
  std::unique_ptr<Sequence> seq;

  void make(SamplingParams sp, int64_t max_tokens = 50) {
    req.request_id = "x";
    req.prompt_token_ids = {1, 5, 6};
    req.sampling = sp;
    req.output = std::make_shared<OutputChannel>();
    seq = std::make_unique<Sequence>(req, max_tokens, 0);
    outputs.add_request(req);
  }
  // Appends `token` and routes its update; returns the processor's result
  // (`stopped` names the sample when a stop string ended it).
  OutputProcessor::Result feed(int32_t token) {
    append_token(*seq, token, cfg);
    const SequenceUpdate u = token_update(*seq, TokenLogprob{token, -0.5f, {}, 0});
    OutputProcessor::Result r;
    outputs.process(std::span<const SequenceUpdate>(&u, 1), r);
    return r;
  }
  // The deltas pushed since the last call, merged.
  RequestOutput delta() {
    RequestOutput d;
    for (const RequestOutput& x : req.output->drain()) merge_delta(d, x);
    return d;
  }
};

TEST(OutputProcessor, MultiByteCharacterSplitAcrossTokensIsEmittedWhole) {
  Fixture f;
  f.make({});
  f.feed(3);  // E2 82: incomplete
  RequestOutput d1 = f.delta();
  EXPECT_EQ(d1.text, "");
  EXPECT_EQ(d1.token_ids, std::vector<int32_t>{3});
  f.feed(4);  // AC completes "€"
  RequestOutput d2 = f.delta();
  EXPECT_EQ(d2.text, "\xE2\x82\xAC");
  EXPECT_EQ(d2.completion_tokens, 2);
  EXPECT_EQ(d2.prompt_tokens, 3);
  EXPECT_DOUBLE_EQ(d2.cumulative_logprob, -1.0);
  EXPECT_FALSE(d2.finished);
}

TEST(OutputProcessor, StopStringIsHeldBackThenCutAndNamesTheSampleToStop) {
  Fixture f;
  std::string p7 = FakeTokenizer::piece(7), p8 = FakeTokenizer::piece(8),
              p9 = FakeTokenizer::piece(9);
  SamplingParams sp;
  sp.stop = {std::string(1, p7[1]) + p8};  // spans tokens 7 and 8
  f.make(sp);
  EXPECT_TRUE(f.feed(9).stopped.empty());
  EXPECT_TRUE(f.feed(7).stopped.empty());
  // Hold-back of len(stop) - 1 = 2 bytes: p7 (which ends in the stop
  // string's first byte) is not shown yet; token ids are never held back.
  RequestOutput d = f.delta();
  EXPECT_EQ(d.text, p9);
  EXPECT_EQ(d.token_ids, (std::vector<int32_t>{9, 7}));
  const OutputProcessor::Result r = f.feed(8);
  // The engine core did not finish it: the processor names it to stop.
  EXPECT_FALSE(f.seq->finished());
  ASSERT_EQ(r.stopped.size(), 1u);
  EXPECT_EQ(r.stopped[0], (std::pair<std::string, int>{"x", 0}));
  EXPECT_EQ(r.finished, std::vector<FinishReason>{FinishReason::kStop});
  EXPECT_FALSE(f.outputs.contains("x"));
  RequestOutput last = f.delta();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last.stop_str, sp.stop[0]);
  EXPECT_EQ(d.text + last.text, p9 + p7[0]);
  EXPECT_EQ(last.token_ids, (std::vector<int32_t>{8}));
}

TEST(OutputProcessor, IncludeStopStrKeepsTheMatchAndHoldsNothingBack) {
  Fixture f;
  std::string p7 = FakeTokenizer::piece(7), p8 = FakeTokenizer::piece(8);
  SamplingParams sp;
  sp.stop = {std::string(1, p7[1]) + p8[0]};
  sp.include_stop_str_in_output = true;
  f.make(sp);
  f.feed(7);
  EXPECT_EQ(f.delta().text, p7);
  EXPECT_EQ(f.feed(8).stopped.size(), 1u);
  EXPECT_EQ(f.delta().text, p8.substr(0, 1));
}

TEST(OutputProcessor, StopStringsWaitForMinTokens) {
  Fixture f;
  SamplingParams sp;
  sp.stop = {FakeTokenizer::piece(7)};
  sp.min_tokens = 2;
  f.make(sp);
  EXPECT_TRUE(f.feed(7).stopped.empty());  // 1 token: not past min_tokens
  EXPECT_TRUE(f.feed(9).stopped.empty());  // the match does not end in the new text
  EXPECT_EQ(f.feed(7).stopped.size(), 1u);
  RequestOutput d = f.delta();
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(d.text, FakeTokenizer::piece(7) + FakeTokenizer::piece(9));
}

TEST(StopChecker, LengthIsCheckedBeforeEos) {
  Fixture f;
  f.make({}, 2);
  EXPECT_FALSE(append_token(*f.seq, 7, f.cfg));
  EXPECT_TRUE(append_token(*f.seq, 2, f.cfg));
  EXPECT_EQ(f.seq->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(f.seq->stop_terminated);
}

TEST(StopChecker, MaxModelLenCapsTheSequence) {
  Fixture f;
  f.cfg.max_model_len = 5;  // prompt 3 + 2
  f.make({}, 50);
  EXPECT_FALSE(append_token(*f.seq, 7, f.cfg));
  EXPECT_TRUE(append_token(*f.seq, 8, f.cfg));
  EXPECT_EQ(f.seq->finish_reason, FinishReason::kLength);
}

TEST(OutputProcessor, StopTokenTextIsShownOnlyWithIncludeStopStr) {
  for (bool include : {false, true}) {
    Fixture f;
    SamplingParams sp;
    sp.stop_token_ids = {8};
    sp.include_stop_str_in_output = include;
    f.make(sp);
    f.feed(7);
    const OutputProcessor::Result r = f.feed(8);
    EXPECT_TRUE(f.seq->finished());
    EXPECT_TRUE(r.stopped.empty());  // the engine core ended it itself
    RequestOutput d = f.delta();
    EXPECT_EQ(d.stop_token_id, 8);
    EXPECT_EQ(d.finish_reason, FinishReason::kStop);
    EXPECT_EQ(d.text, FakeTokenizer::piece(7) + (include ? FakeTokenizer::piece(8) : ""));
  }
}

TEST(OutputProcessor, BestOfSendsTheNBestWholeAndAbortEndsTheRest) {
  FakeTokenizer tok{40};
  OutputProcessor outputs{tok};
  GenerateRequest req;
  req.request_id = "b";
  req.prompt_token_ids = {1, 5};
  req.sampling.n = 2;
  req.sampling.best_of = 3;
  req.output = std::make_shared<OutputChannel>();
  outputs.add_request(req);
  const auto update = [&](int index, int32_t token, float logprob, bool finished) {
    SequenceUpdate u;
    u.request_id = "b";
    u.index = index;
    u.token = TokenLogprob{token, logprob, {}, 0};
    u.finished = finished;
    u.finish_reason = finished ? FinishReason::kLength : FinishReason::kNone;
    return u;
  };
  OutputProcessor::Result r;
  const std::vector<SequenceUpdate> step1 = {update(0, 7, -3.0f, false), update(1, 8, -1.0f, true),
                                             update(2, 9, -2.0f, true)};
  outputs.process(step1, r);
  EXPECT_TRUE(req.output->drain().empty());  // best_of > n: nothing until all finish
  const std::vector<SequenceUpdate> step2 = {update(0, 10, -0.5f, true)};
  outputs.process(step2, r);
  EXPECT_EQ(r.finished, std::vector<FinishReason>{FinishReason::kLength});
  const std::vector<RequestOutput> got = req.output->drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[0].token_ids, std::vector<int32_t>{8});  // -1.0
  EXPECT_EQ(got[1].index, 1);
  EXPECT_EQ(got[1].token_ids, std::vector<int32_t>{9});  // -2.0 beats -3.5
  EXPECT_FALSE(outputs.contains("b"));
  EXPECT_FALSE(outputs.abort("b"));

  // Abort mid-way: the n best so far, finished "abort".
  req.request_id = "c";
  req.output = std::make_shared<OutputChannel>();
  outputs.add_request(req);
  std::vector<SequenceUpdate> c = {update(0, 7, -1.0f, false), update(1, 8, -3.0f, false),
                                   update(2, 9, -2.0f, false)};
  for (SequenceUpdate& u : c) u.request_id = "c";
  outputs.process(c, r);
  EXPECT_TRUE(outputs.abort("c"));
  const std::vector<RequestOutput> aborted = req.output->drain();
  ASSERT_EQ(aborted.size(), 2u);
  EXPECT_EQ(aborted[0].token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(aborted[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(aborted[0].finished);
  EXPECT_EQ(aborted[1].index, 1);
  EXPECT_EQ(aborted[1].token_ids, std::vector<int32_t>{9});
  EXPECT_FALSE(outputs.contains("c"));
}

}  // namespace
}  // namespace pagoda
