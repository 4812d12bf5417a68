// Golden logits: our CPU fp32 forward vs HF transformers' float32 logits
// (shared/models/<m>/reference.json, computed by someone else with HF).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

void check_reference(const std::string& name) {
  const std::string dir = shared_model(name);
  std::ifstream in(dir + "/reference.json");
  EXPECT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  CpuModel m(dir, 80, 1024);
  const int64_t V = m.config.vocab_size;
  double worst = 0;
  int checked = 0;
  for (const json& seq : ref["sequences"]) {
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    const auto n = static_cast<int32_t>(ids.size());
    const bool all = seq.contains("all_logits");
    std::vector<int32_t> rows;
    if (all)
      for (int32_t i = 0; i < n; ++i) rows.push_back(i);
    const int32_t blocks = (n + 15) / 16;
    const std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, blocks, rows));
    if (all) {
      const auto& al = seq["all_logits"];
      ASSERT_EQ(al.size(), static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) {
        const auto want = al[static_cast<size_t>(i)].get<std::vector<double>>();
        ASSERT_EQ(want.size(), static_cast<size_t>(V));
        const double e = rel_l2(logits.data(), want, static_cast<size_t>(i * V));
        EXPECT_LT(e, 1e-4) << name << " n=" << n << " position " << i;
        worst = std::max(worst, e);
        ++checked;
      }
    }
    const auto want = seq["last_logits"].get<std::vector<double>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(V));
    const size_t last_off = all ? static_cast<size_t>((n - 1) * V) : 0;
    const double e = rel_l2(logits.data(), want, last_off);
    EXPECT_LT(e, 1e-4) << name << " n=" << n << " last position";
    worst = std::max(worst, e);
    ++checked;
  }
  EXPECT_GE(checked, 5 + 33);
  std::printf("[golden] %s: %d logit rows, worst relative L2 error %.3g\n", name.c_str(), checked, worst);
}

TEST(ModelGolden, TinyRandomLlamaMatchesTransformersFp32) { check_reference("tiny-random-llama"); }

TEST(ModelGolden, TinyRandomQwen2MatchesTransformersFp32) { check_reference("tiny-random-qwen2"); }

// The reference's greedy continuation, decoded one token per step through
// the paged cache (prefill, then decodes), for the shorter sequences.
void check_greedy(const std::string& name) {
  const std::string dir = shared_model(name);
  std::ifstream in(dir + "/reference.json");
  const json ref = json::parse(in);
  CpuModel m(dir, 80, 1024);
  const auto V = static_cast<size_t>(m.config.vocab_size);
  int sequences = 0;
  for (const json& seq : ref["sequences"]) {
    auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    if (ids.size() > 200) continue;
    const auto greedy = seq["greedy_ids"].get<std::vector<int32_t>>();
    const int32_t max_blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, max_blocks));
    std::vector<int32_t> got;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + static_cast<long>(V)) - logits.begin());
      got.push_back(next);
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(one_seq_batch({next}, pos, 0, max_blocks));
    }
    EXPECT_EQ(got, greedy) << "prompt length " << seq["input_ids"].size();
    ++sequences;
  }
  EXPECT_GE(sequences, 3);
}

// Chunked prefill: the 33-token sequence in chunks of 20 and 13 tokens (the
// second chunk attends to the first through the paged cache) gives HF's
// logits at every position of both chunks.
TEST(ModelGolden, TinyRandomQwen2ChunkedPrefillMatchesTransformers) {
  const std::string dir = shared_model("tiny-random-qwen2");
  std::ifstream in(dir + "/reference.json");
  const json ref = json::parse(in);
  CpuModel m(dir, 8, 64);
  const auto V = static_cast<size_t>(m.config.vocab_size);
  int found = 0;
  for (const json& seq : ref["sequences"]) {
    if (!seq.contains("all_logits")) continue;
    ++found;
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(ids.size(), 33u);
    const std::vector<int32_t> a(ids.begin(), ids.begin() + 20), b(ids.begin() + 20, ids.end());
    std::vector<int32_t> rows_a(20), rows_b(13);
    for (int32_t i = 0; i < 20; ++i) rows_a[static_cast<size_t>(i)] = i;
    for (int32_t i = 0; i < 13; ++i) rows_b[static_cast<size_t>(i)] = i;
    // Blocks 5, 6, 7 (not 0..n) to exercise the block table.
    const std::vector<float> la = m.run(one_seq_batch(a, 0, 5, 3, rows_a));
    const std::vector<float> lb = m.run(one_seq_batch(b, 20, 5, 3, rows_b));
    for (size_t p = 0; p < 33; ++p) {
      const auto want = seq["all_logits"][p].get<std::vector<double>>();
      const double e = p < 20 ? rel_l2(la.data(), want, p * V) : rel_l2(lb.data(), want, (p - 20) * V);
      EXPECT_LT(e, 1e-4) << "position " << p;
    }
  }
  EXPECT_EQ(found, 1);
}

TEST(ModelGolden, TinyRandomLlamaGreedyDecodeMatchesTransformers) { check_greedy("tiny-random-llama"); }

TEST(ModelGolden, TinyRandomQwen2GreedyDecodeMatchesTransformers) { check_greedy("tiny-random-qwen2"); }

}  // namespace
}  // namespace pagoda::test
