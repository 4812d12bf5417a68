// ModelRunner::execute_and_sample: the device-sampling path is taken only
// when the executor offers it and every sampling sequence needs nothing the
// device sampler lacks; it passes each row's parameters (greedy rows as
// temperature 0, others with a seed drawn from the sequence's own rng, so a
// seeded request reproduces) and returns the executor's ids in order.
#include <gtest/gtest.h>

#include <random>

#include "engine/model_runner.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

// Records what it was asked; "samples" id = 100 + row.
class DeviceSamplingExecutor final : public testing::FakeExecutor {
 public:
  DeviceSamplingExecutor(bool can) : FakeExecutor(200, 16, 4), can_(can) {}
  bool can_sample_on_device() const override { return can_; }
  void execute_and_sample(const ForwardBatch& batch, const std::vector<DeviceSampleParams>& params,
                          std::vector<int32_t>& ids) override {
    ++calls;
    last_params = params;
    last_rows = batch.logits_indices.size();
    ids.clear();
    for (size_t i = 0; i < params.size(); ++i) ids.push_back(static_cast<int32_t>(100 + i));
  }
  int calls = 0;
  size_t last_rows = 0;
  std::vector<DeviceSampleParams> last_params;

 private:
  bool can_;
};

struct Fixture {
  testing::FakeTokenizer tok{40};
  GenerateRequest a{std::string("a"), {1, 10, 11}};
  GenerateRequest b{std::string("b"), {1, 20}};
  std::unique_ptr<Sequence> sa, sb;
  SchedulerOutput out;
  Fixture() {
    b.sampling.temperature = 0.8f;
    b.sampling.top_k = 5;
    b.sampling.top_p = 0.9f;
    b.sampling.min_p = 0.05f;
    sa = std::make_unique<Sequence>(a, 10, 1, tok);
    sa->sampling.temperature = 0.0f;
    sb = std::make_unique<Sequence>(b, 10, 42, tok);
    sa->block_table = {0};
    sb->block_table = {1};
    out.seqs = {{sa.get(), 3, true}, {sb.get(), 2, true}};
  }
};

TEST(DeviceSampling, RunnerPassesParamsAndSeedsFromTheSequenceRng) {
  Fixture f;
  DeviceSamplingExecutor ex(true);
  ModelRunner runner(ex);
  std::vector<int32_t> ids;
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, ids));
  EXPECT_EQ(ex.calls, 1);
  EXPECT_EQ(ex.last_rows, 2u);
  EXPECT_EQ(ids, (std::vector<int32_t>{100, 101}));
  ASSERT_EQ(ex.last_params.size(), 2u);
  EXPECT_EQ(ex.last_params[0].temperature, 0.0f);
  EXPECT_EQ(ex.last_params[0].seed, 0u);
  EXPECT_FLOAT_EQ(ex.last_params[1].temperature, 0.8f);
  EXPECT_EQ(ex.last_params[1].top_k, 5);
  EXPECT_FLOAT_EQ(ex.last_params[1].top_p, 0.9f);
  EXPECT_FLOAT_EQ(ex.last_params[1].min_p, 0.05f);
  std::mt19937_64 same(42);  // the sequence's rng seed: its first draw
  EXPECT_EQ(ex.last_params[1].seed, same());
}

TEST(DeviceSampling, FallsBackWhenTheExecutorOrASequenceCannot) {
  {
    Fixture f;
    DeviceSamplingExecutor ex(false);
    ModelRunner runner(ex);
    std::vector<int32_t> ids;
    EXPECT_FALSE(runner.execute_and_sample(f.out, {2}, ids));
    EXPECT_EQ(ex.calls, 0);
  }
  auto check = [](auto&& tweak, bool want) {
    Fixture f;
    tweak(f.sb->sampling, *f.sb);
    DeviceSamplingExecutor ex(true);
    ModelRunner runner(ex);
    std::vector<int32_t> ids;
    EXPECT_EQ(runner.execute_and_sample(f.out, {2}, ids), want);
    EXPECT_EQ(ex.calls, want ? 1 : 0);
  };
  check([](SamplingParams& p, Sequence&) { p.repetition_penalty = 1.1f; }, false);
  check([](SamplingParams& p, Sequence&) { p.presence_penalty = 0.5f; }, false);
  check([](SamplingParams& p, Sequence&) { p.frequency_penalty = 0.5f; }, false);
  check([](SamplingParams& p, Sequence&) { p.logit_bias = {{3, 1.0f}}; }, false);
  check([](SamplingParams& p, Sequence&) { p.logprobs = 2; }, false);
  check([](SamplingParams& p, Sequence&) { p.top_p = 0.0f; }, false);
  // min_tokens not reached: EOS must be suppressed (CPU path) ...
  check([](SamplingParams& p, Sequence&) { p.min_tokens = 3; }, false);
  // ... unless nothing is to be suppressed.
  check([](SamplingParams& p, Sequence&) { p.min_tokens = 3; p.ignore_eos = true; }, true);
  check([](SamplingParams&, Sequence&) {}, true);
}

}  // namespace
}  // namespace pagoda
