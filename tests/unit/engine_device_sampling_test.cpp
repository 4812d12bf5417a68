// ModelRunner::execute_and_sample / build_sampling: every sampling sequence
// goes to the device sampler when the executor offers one (no whole-batch
// fallback), each row carrying its SamplingParams (greedy rows as
// temperature 0, others with a seed drawn from the sequence's own rng, so a
// seeded request reproduces), its bans (min_tokens, bad words), allowed ids,
// logit_bias, logprobs and a penalty slot that is built from the sequence's
// ids once, kept while it samples every step and given back when it does
// not; the samples of one request read their own rows.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "engine/model_runner.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

// Records what it was asked; "samples" id = 100 + row.
class DeviceSamplingExecutor final : public testing::FakeExecutor {
 public:
  explicit DeviceSamplingExecutor(bool can) : FakeExecutor(200, 16, 4), can_(can) {}
  bool can_sample_on_device() const override { return can_; }
  void execute_and_sample(const ForwardBatch& batch, const DeviceSamplingBatch& sampling,
                          std::vector<TokenLogprob>& out) override {
    sampling.prepare();  // as an executor must, once the forward is enqueued
    ++calls;
    last = sampling;
    last_rows = batch.logits_indices.size();
    out.clear();
    for (size_t i = 0; i < sampling.rows.size(); ++i) {
      const DeviceSampleRow& r = sampling.rows[i];
      if (r.score_token >= 0)  // a prompt-logprob score row: its token, rank 7 + row
        out.push_back(
            {r.score_token, -1.5f, {{r.score_token, -1.5f}}, static_cast<int64_t>(7 + i)});
      else
        out.push_back({static_cast<int32_t>(100 + i), -0.5f, {}});
    }
  }
  int calls = 0;
  size_t last_rows = 0;
  DeviceSamplingBatch last;

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
    sa = std::make_unique<Sequence>(a, 10, 1);
    sa->sampling.temperature = 0.0f;
    sb = std::make_unique<Sequence>(b, 10, 42);
    sa->block_table = {0};
    sb->block_table = {1};
    out.seqs = {{sa.get(), 3, true}, {sb.get(), 2, true}};
  }
};

TEST(DeviceSampling, RunnerPassesParamsAndSeedsFromTheSequenceRng) {
  Fixture f;
  DeviceSamplingExecutor ex(true);
  ModelRunner runner(ex);
  std::vector<TokenLogprob> got;
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, got));
  EXPECT_EQ(ex.calls, 1);
  EXPECT_EQ(ex.last_rows, 2u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].token_id, 100);
  EXPECT_EQ(got[1].token_id, 101);
  const auto& r = ex.last.rows;
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].src_row, 0);
  EXPECT_EQ(r[1].src_row, 1);
  EXPECT_EQ(r[0].temperature, 0.0f);
  EXPECT_EQ(r[0].seed, 0u);
  EXPECT_EQ(r[0].logprobs, -1);
  EXPECT_EQ(r[0].slot, -1);
  EXPECT_FLOAT_EQ(r[1].temperature, 0.8f);
  EXPECT_EQ(r[1].top_k, 5);
  EXPECT_FLOAT_EQ(r[1].top_p, 0.9f);
  EXPECT_FLOAT_EQ(r[1].min_p, 0.05f);
  std::mt19937_64 same(42);  // the sequence's rng seed: its first draw
  EXPECT_EQ(r[1].seed, same());
  EXPECT_TRUE(ex.last.inits.empty());
}

TEST(DeviceSampling, NoFallbackWhenTheExecutorCanOnlyWhenItCannot) {
  {
    Fixture f;
    DeviceSamplingExecutor ex(false);
    ModelRunner runner(ex);
    std::vector<TokenLogprob> got;
    EXPECT_FALSE(runner.execute_and_sample(f.out, {2}, got));
    EXPECT_EQ(ex.calls, 0);
  }
  // Every feature stays on the device.
  auto check = [](auto&& tweak) {
    Fixture f;
    tweak(f.sb->sampling);
    DeviceSamplingExecutor ex(true);
    ModelRunner runner(ex);
    std::vector<TokenLogprob> got;
    EXPECT_TRUE(runner.execute_and_sample(f.out, {2}, got));
    EXPECT_EQ(ex.calls, 1);
    return ex.last;
  };
  EXPECT_EQ(check([](SamplingParams& p) { p.repetition_penalty = 1.1f; }).rows[1].slot, 0);
  EXPECT_FLOAT_EQ(
      check([](SamplingParams& p) { p.presence_penalty = 0.5f; }).rows[1].presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(
      check([](SamplingParams& p) { p.frequency_penalty = 0.5f; }).rows[1].frequency_penalty, 0.5f);
  {
    const DeviceSamplingBatch b = check([](SamplingParams& p) {
      p.logit_bias = {{3, 1.0f}, {7, -2.f}};
    });
    ASSERT_EQ(b.rows[1].bias_count, 2);
    EXPECT_EQ(b.bias[static_cast<size_t>(b.rows[1].bias_begin) + 1],
              (std::pair<int32_t, float>{7, -2.f}));
  }
  EXPECT_EQ(check([](SamplingParams& p) { p.logprobs = 2; }).rows[1].logprobs, 2);
  EXPECT_EQ(check([](SamplingParams& p) {
              p.n = 1;
              p.best_of = 2;
            })
                .rows[1]
                .logprobs,
            0);  // ranking needs it
  {
    // min_tokens not reached: EOS and stop ids are banned ...
    const DeviceSamplingBatch b = check([](SamplingParams& p) {
      p.min_tokens = 3;
      p.stop_token_ids = {9};
    });
    ASSERT_EQ(b.rows[1].ban_count, 2);
    EXPECT_EQ(b.ids[static_cast<size_t>(b.rows[1].ban_begin)], 2);
    EXPECT_EQ(b.ids[static_cast<size_t>(b.rows[1].ban_begin) + 1], 9);
  }
  // ... not EOS with ignore_eos.
  EXPECT_EQ(check([](SamplingParams& p) {
              p.min_tokens = 3;
              p.ignore_eos = true;
            })
                .rows[1]
                .ban_count,
            0);
  {
    const DeviceSamplingBatch b = check([](SamplingParams& p) { p.allowed_token_ids = {5, 6, 7}; });
    ASSERT_EQ(b.rows[1].allow_count, 3);
    EXPECT_EQ(b.ids[static_cast<size_t>(b.rows[1].allow_begin) + 2], 7);
  }
  {
    // A one-token bad word is banned at once; a two-token one after its
    // first token (the prompt does not count).
    const DeviceSamplingBatch b = check([](SamplingParams& p) {
      p.bad_words_token_ids = {{33}, {20, 34}};
    });
    ASSERT_EQ(b.rows[1].ban_count, 1);
    EXPECT_EQ(b.ids[static_cast<size_t>(b.rows[1].ban_begin)], 33);
  }
}

// Prompt logprobs stay on the device path: each scored position is a score
// row after the sampling rows, reading the logits rows build_batch puts
// after the sampling ones; the results go to the sequence's
// prompt_logprobs and `sampled` keeps only the sampled tokens.
TEST(DeviceSampling, PromptLogprobPositionsAreScoreRowsOnTheDevice) {
  Fixture f;
  f.sb->sampling.prompt_logprobs = 3;
  f.out.seqs = {{f.sb.get(), 2, true}, {f.sa.get(), 3, true}};
  f.sa->sampling.prompt_logprobs = 25;  // capped at 20, as the host scores
  DeviceSamplingExecutor ex(true);
  ModelRunner runner(ex);
  std::vector<TokenLogprob> got;
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, got));
  EXPECT_EQ(ex.calls, 1);
  // b's prompt {1, 20} scores position 0 (token 20); a's {1, 10, 11}
  // positions 0 and 1 (tokens 10, 11): 2 sampling + 3 score rows.
  EXPECT_EQ(ex.last_rows, 5u);
  const auto& r = ex.last.rows;
  ASSERT_EQ(r.size(), 5u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(r[i].score_token, -1) << i;
  const int32_t tokens[] = {20, 10, 11}, k[] = {3, 20, 20};
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_EQ(r[i].src_row, static_cast<int32_t>(i)) << i;
    EXPECT_EQ(r[i].score_token, tokens[i - 2]) << i;
    EXPECT_EQ(r[i].logprobs, k[i - 2]) << i;
    EXPECT_EQ(r[i].slot, -1) << i;
    EXPECT_EQ(r[i].ban_count + r[i].allow_count + r[i].bias_count, 0) << i;
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].token_id, 100);
  EXPECT_EQ(got[1].token_id, 101);
  ASSERT_EQ(f.sb->prompt_logprobs.size(), 1u);
  EXPECT_EQ(f.sb->prompt_logprobs[0].token_id, 20);
  EXPECT_EQ(f.sb->prompt_logprobs[0].rank, 9);
  EXPECT_FLOAT_EQ(f.sb->prompt_logprobs[0].logprob, -1.5f);
  ASSERT_EQ(f.sb->prompt_logprobs[0].top.size(), 1u);
  ASSERT_EQ(f.sa->prompt_logprobs.size(), 2u);
  EXPECT_EQ(f.sa->prompt_logprobs[0].token_id, 10);
  EXPECT_EQ(f.sa->prompt_logprobs[0].rank, 10);
  EXPECT_EQ(f.sa->prompt_logprobs[1].token_id, 11);
  EXPECT_EQ(f.sa->prompt_logprobs[1].rank, 11);
}

TEST(DeviceSampling, PenaltySlotIsBuiltOnceKeptAndGivenBack) {
  Fixture f;
  f.sb->sampling.repetition_penalty = 1.2f;
  f.sa->sampling.frequency_penalty = 0.3f;
  f.sa->token_ids.push_back(17);  // one output token already (a resumed sequence)
  DeviceSamplingExecutor ex(true);
  ModelRunner runner(ex);
  std::vector<TokenLogprob> got;
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, got));
  ASSERT_EQ(ex.last.inits.size(), 2u);
  const DeviceSlotInit ia = ex.last.inits[0];
  EXPECT_EQ(ia.slot, ex.last.rows[0].slot);
  EXPECT_EQ(ia.prompt_count, 3);
  EXPECT_EQ(ia.output_count, 1);
  EXPECT_EQ(ex.last.ids[static_cast<size_t>(ia.output_begin)], 17);
  EXPECT_NE(ex.last.rows[0].slot, ex.last.rows[1].slot);
  EXPECT_EQ(ex.last.num_slots, 2);
  EXPECT_EQ(runner.num_penalty_slots_held(), 2u);

  // Next step: same sequences, no rebuild.
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, got));
  EXPECT_TRUE(ex.last.inits.empty());
  const int32_t slot_b = ex.last.rows[1].slot;

  // b alone: a's slot goes back; a new sequence then reuses it.
  SchedulerOutput only_b;
  only_b.seqs = {{f.sb.get(), 1, true}};
  ASSERT_TRUE(runner.execute_and_sample(only_b, {2}, got));
  EXPECT_EQ(ex.last.rows[0].slot, slot_b);
  EXPECT_TRUE(ex.last.inits.empty());
  EXPECT_EQ(runner.num_penalty_slots_held(), 1u);
  GenerateRequest c{std::string("c"), {1, 30}};
  c.sampling.presence_penalty = 0.5f;
  Sequence sc(c, 10, 5);
  sc.block_table = {2};
  SchedulerOutput b_and_c;
  b_and_c.seqs = {{f.sb.get(), 1, true}, {&sc, 2, true}};
  ASSERT_TRUE(runner.execute_and_sample(b_and_c, {2}, got));
  ASSERT_EQ(ex.last.inits.size(), 1u);
  EXPECT_EQ(ex.last.inits[0].slot, ex.last.rows[1].slot);
  EXPECT_EQ(ex.last.num_slots, 2);  // a's slot reused, no growth

  // a samples again (resumed): rebuilt from its ids.
  ASSERT_TRUE(runner.execute_and_sample(f.out, {2}, got));
  ASSERT_EQ(ex.last.inits.size(), 1u);
  EXPECT_EQ(ex.last.inits[0].slot, ex.last.rows[0].slot);
}

TEST(DeviceSampling, SamplesOfOneRequestReadTheirOwnRowsWithTheirOwnSeedsAndSlots) {
  Fixture f;
  GenerateRequest g{std::string("g"), {1, 12, 13}};
  g.sampling.n = 3;
  g.sampling.temperature = 0.9f;
  g.sampling.repetition_penalty = 1.1f;
  Sequence p(g, 10, 7, 0), c1(g, 10, 8, 1), c2(g, 10, 9, 2);
  p.block_table = {3};
  c1.block_table = {4};
  c2.block_table = {5};
  SchedulerOutput out;
  out.seqs = {{f.sa.get(), 3, true}, {&p, 3, true}, {&c1, 3, true}, {&c2, 3, true}};
  DeviceSamplingExecutor ex(true);
  ModelRunner runner(ex);
  std::vector<TokenLogprob> got;
  ASSERT_TRUE(runner.execute_and_sample(out, {2}, got));
  EXPECT_EQ(ex.last_rows, 4u);  // logits rows: one per sampling sequence
  ASSERT_EQ(ex.last.rows.size(), 4u);
  EXPECT_EQ(got.size(), 4u);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(ex.last.rows[static_cast<size_t>(i)].src_row, i);
  std::mt19937_64 r7(7), r8(8), r9(9);
  EXPECT_EQ(ex.last.rows[1].seed, r7());
  EXPECT_EQ(ex.last.rows[2].seed, r8());
  EXPECT_EQ(ex.last.rows[3].seed, r9());
  EXPECT_EQ(ex.last.inits.size(), 3u);
  std::set<int32_t> slots{ex.last.rows[1].slot, ex.last.rows[2].slot, ex.last.rows[3].slot};
  EXPECT_EQ(slots.size(), 3u);
}

}  // namespace
}  // namespace pagoda
