// Tensor parallelism on the CPU backend (engine/model/llama.h): fp32 logits
// at TP=2 and TP=4 equal TP=1 within 1e-5 (max |diff| / max |logit|) for
// stories260K (8 heads, 4 KV heads), tiny-random-llama (4, 4) and
// tiny-random-qwen2 (4, 2; q/k/v biases), over a prefill, a mixed
// prefill + decode batch of two sequences, and 12 greedy decode steps; a
// size that does not divide the model's heads is skipped with a message
// and gives the clear error instead.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>

#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

struct Case {
  const char* model;
  int tp;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " TP=" << c.tp; }

class TpLogits : public ::testing::TestWithParam<Case> {};

// The steps every executor runs; returns every step's logits, concatenated.
std::vector<std::vector<float>> run_steps(ModelExecutor& ex) {
  const int64_t V = ex.vocab_size();
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  // Sequence A: a 21-token prefill (crosses a block) in blocks 0, 1.
  std::vector<int32_t> a = {1};
  for (int32_t i = 0; i < 20; ++i) a.push_back(static_cast<int32_t>((i * 37 + 11) % V));
  ex.execute(one_seq_batch(a, 0, 0, 4), logits);
  out.push_back(logits);
  // Mixed: B's 7-token prefill (blocks 8..) with A's first decode (greedy).
  std::vector<int32_t> b = {1, 5, 9, 100, 200, 300, 400};
  int32_t next_a = argmax_row(logits, 0, V);
  ForwardBatch fb = one_seq_batch(b, 0, 8, 4);
  const ForwardBatch da = one_seq_batch({next_a}, static_cast<int32_t>(a.size()), 0, 4);
  ForwardBatch mixed;
  mixed.input_ids = da.input_ids;
  mixed.input_ids.insert(mixed.input_ids.end(), fb.input_ids.begin(), fb.input_ids.end());
  mixed.positions = da.positions;
  mixed.positions.insert(mixed.positions.end(), fb.positions.begin(), fb.positions.end());
  mixed.slot_mapping = da.slot_mapping;
  mixed.slot_mapping.insert(mixed.slot_mapping.end(), fb.slot_mapping.begin(), fb.slot_mapping.end());
  mixed.query_start_loc = {0, 1, 1 + static_cast<int32_t>(b.size())};
  mixed.context_lens = {da.context_lens[0], fb.context_lens[0]};
  mixed.max_blocks_per_seq = 4;
  mixed.block_tables = da.block_tables;
  mixed.block_tables.insert(mixed.block_tables.end(), fb.block_tables.begin(), fb.block_tables.end());
  mixed.logits_indices = {0, static_cast<int32_t>(b.size())};
  ex.execute(mixed, logits);
  out.push_back(logits);
  // 12 decode steps of both sequences together (greedy on this run's logits).
  int32_t pos_a = static_cast<int32_t>(a.size()) + 1, pos_b = static_cast<int32_t>(b.size());
  for (int step = 0; step < 12; ++step) {
    const int32_t ta = argmax_row(logits, 0, V), tb = argmax_row(logits, 1, V);
    ForwardBatch d;
    d.input_ids = {ta, tb};
    d.positions = {pos_a, pos_b};
    d.slot_mapping = {(0 + pos_a / 16) * 16 + pos_a % 16, (8 + pos_b / 16) * 16 + pos_b % 16};
    d.query_start_loc = {0, 1, 2};
    d.context_lens = {pos_a + 1, pos_b + 1};
    d.max_blocks_per_seq = 4;
    d.block_tables = {0, 1, 2, 3, 8, 9, 10, 11};
    d.logits_indices = {0, 1};
    ex.execute(d, logits);
    out.push_back(logits);
    ++pos_a;
    ++pos_b;
  }
  return out;
}

TEST_P(TpLogits, EqualTp1) {
  const Case c = GetParam();
  const std::string dir = shared_model(c.model);
  const ModelConfig config = ModelConfig::from_dir(dir);
  if (config.num_attention_heads % c.tp != 0 || config.num_key_value_heads % c.tp != 0) {
    // Not a valid split for this model: the clear error is what it gets.
    try {
      cpu_executor(dir, c.tp);
      FAIL() << "tensor_parallel_size " << c.tp << " accepted for " << c.model;
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tensor_parallel_size " + std::to_string(c.tp) + " does not divide"), std::string::npos) << msg;
      EXPECT_NE(msg.find(config.num_key_value_heads % c.tp ? "num_key_value_heads " : "num_attention_heads "),
                std::string::npos) << msg;
    }
    GTEST_SKIP() << c.model << " (" << config.num_attention_heads << " heads, " << config.num_key_value_heads
                 << " KV heads) does not split " << c.tp << " ways: checked the error instead";
  }
  auto one = cpu_executor(dir, 1);
  auto tp = cpu_executor(dir, c.tp);
  // The CPU KV budget covers all ranks; each holds 1/tp of the heads, so
  // the block count is TP=1's.
  EXPECT_EQ(tp->num_kv_blocks(), one->num_kv_blocks());
  EXPECT_NE(tp->describe().find("tensor parallel " + std::to_string(c.tp)), std::string::npos) << tp->describe();
  const auto want = run_steps(*one);
  const auto got = run_steps(*tp);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << "step " << s;
    const double d = max_rel_diff(got[s], want[s]);
    worst = std::max(worst, d);
    EXPECT_LT(d, 1e-5) << c.model << " TP=" << c.tp << " step " << s;
  }
  std::printf("[tp] %s TP=%d vs TP=1: %zu steps, max |diff| / max |logit| = %.2e\n", c.model, c.tp, want.size(),
              worst);
}

INSTANTIATE_TEST_SUITE_P(Models, TpLogits,
                         ::testing::Values(Case{"stories260K", 2}, Case{"stories260K", 4},
                                           Case{"tiny-random-llama", 2}, Case{"tiny-random-llama", 4},
                                           Case{"tiny-random-qwen2", 2}, Case{"tiny-random-qwen2", 4}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = std::string(i.param.model) + "_tp" + std::to_string(i.param.tp);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace pagoda::test
