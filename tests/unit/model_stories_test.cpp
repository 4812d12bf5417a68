// stories260K on the CPU backend vs llama2.c's run.c greedy output
// (shared/testvectors/stories260K_greedy.json): every greedy id through the
// paged cache, the first 3 steps' top-5 logits, and a mixed prefill+decode
// batch equal to separate runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

json load_vectors() {
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);
}

int32_t argmax(const float* v, int64_t n) {
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}

TEST(ModelStories260K, GreedyMatchesLlama2c) {
  const json vec = load_vectors();
  CpuModel m(shared_model("stories260K"), 64, 512, 1);
  const int64_t V = m.config.vocab_size;
  ASSERT_EQ(V, 512);
  int cases = 0;
  size_t total_tokens = 0;
  double decode_seconds = 0;
  for (const json& c : vec["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto max_blocks = static_cast<int32_t>((prompt.size() + want.size() + 15) / 16);
    ASSERT_LE(max_blocks, 64);
    std::vector<float> logits = m.run(one_seq_batch(prompt, 0, 0, max_blocks));
    std::vector<int32_t> got;
    auto pos = static_cast<int32_t>(prompt.size());
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t step = 0; step < want.size(); ++step) {
      if (step < 3) {
        // Top-5 (id, logit) of this step vs run.c.
        const json& top = c["top5_first3_runc"][step];
        std::vector<int32_t> order(static_cast<size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                          [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
        for (size_t k = 0; k < 5; ++k) {
          EXPECT_EQ(order[k], top[k][0].get<int32_t>()) << "case '" << c["prompt"] << "' step " << step << " rank " << k;
          EXPECT_NEAR(logits[static_cast<size_t>(top[k][0].get<int32_t>())], top[k][1].get<double>(), 1e-3)
              << "case '" << c["prompt"] << "' step " << step << " rank " << k;
        }
      }
      const int32_t next = argmax(logits.data(), V);
      got.push_back(next);
      if (step + 1 < want.size()) logits = m.run(one_seq_batch({next}, pos++, 0, max_blocks));
    }
    decode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_tokens += want.size();
    EXPECT_EQ(got, want) << "case '" << c["prompt"] << "'";
    ++cases;
  }
  EXPECT_EQ(cases, 3);
  std::printf("[stories260K] %zu greedy tokens, decode %.1f tok/s (1 thread)\n", total_tokens,
              static_cast<double>(total_tokens) / decode_seconds);
}

// Sequence A (prefill of its prompt) and sequence B (one decode after its
// own earlier prefill) in one ForwardBatch, with block tables in different
// blocks, give the same logits as running each alone.
TEST(ModelStories260K, MixedPrefillDecodeBatchEqualsSeparateRuns) {
  const json vec = load_vectors();
  const auto a_ids = vec["cases"][1]["prompt_ids"].get<std::vector<int32_t>>();  // "Once upon a time"
  const auto b_prompt = vec["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(a_ids.size(), 2u);
  // B: 20 tokens of context already (crosses a block boundary), then decode one.
  std::vector<int32_t> b_ctx = b_prompt;
  const auto b_greedy = vec["cases"][2]["greedy_ids"].get<std::vector<int32_t>>();
  b_ctx.insert(b_ctx.end(), b_greedy.begin(), b_greedy.begin() + 15);
  const int32_t b_next = b_greedy[15];
  const auto b_pos = static_cast<int32_t>(b_ctx.size());  // position of the decoded token

  CpuModel sep(shared_model("stories260K"), 16, 64);
  const int64_t V = sep.config.vocab_size;
  const std::vector<float> a_alone = sep.run(one_seq_batch(a_ids, 0, 0, 2));
  sep.run(one_seq_batch(b_ctx, 0, 4, 2));
  const std::vector<float> b_alone = sep.run(one_seq_batch({b_next}, b_pos, 4, 2));

  CpuModel mix(shared_model("stories260K"), 16, 64);
  mix.run(one_seq_batch(b_ctx, 0, 9, 2));  // B's prefill into blocks 9, 10
  ForwardBatch fb;
  const auto na = static_cast<int32_t>(a_ids.size());
  fb.input_ids = a_ids;
  fb.input_ids.push_back(b_next);
  for (int32_t i = 0; i < na; ++i) {
    fb.positions.push_back(i);
    fb.slot_mapping.push_back(2 * 16 + i);  // A lives in blocks 2, 3
  }
  fb.positions.push_back(b_pos);
  fb.slot_mapping.push_back((9 + b_pos / 16) * 16 + b_pos % 16);
  fb.query_start_loc = {0, na, na + 1};
  fb.context_lens = {na, b_pos + 1};
  fb.max_blocks_per_seq = 2;
  fb.block_tables = {2, 3, 9, 10};
  fb.logits_indices = {na - 1, na};
  ASSERT_FALSE(fb.is_decode_only());
  const std::vector<float> both = mix.run(fb);
  ASSERT_EQ(both.size(), static_cast<size_t>(2 * V));
  for (int64_t v = 0; v < V; ++v) {
    EXPECT_NEAR(both[static_cast<size_t>(v)], a_alone[static_cast<size_t>(v)], 1e-5) << "A vocab " << v;
    EXPECT_NEAR(both[static_cast<size_t>(V + v)], b_alone[static_cast<size_t>(v)], 1e-5) << "B vocab " << v;
  }
  // And B's decode picks the run.c greedy token that follows.
  EXPECT_EQ(argmax(both.data() + V, V), b_greedy[16]);
}

}  // namespace
}  // namespace pagoda::test
