// Batched greedy decoding through ModelExecutor vs HF transformers' greedy
// ids (shared/models/tiny-random-{qwen2-chat,chinese-llama}/reference.json):
// tied embeddings, bf16 checkpoints, full-size vocabularies; all 8 prompts of
// a model prefill together in one step, then decode together.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_executor.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

void check_batched_greedy(const std::string& name, size_t steps) {
  const std::string dir = shared_model(name);
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  std::vector<std::vector<int32_t>> prompts, want;
  for (const char* part : {"chat", "completion"})
    for (const json& c : ref[part]) {
      prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
      want.push_back(c["greedy_ids"].get<std::vector<int32_t>>());
      ASSERT_GE(want.back().size(), steps);
    }
  ASSERT_EQ(prompts.size(), 8u);

  const ModelConfig config = ModelConfig::from_dir(dir);
  EXPECT_TRUE(config.tie_word_embeddings);
  ExecutorOptions o;
  o.model_dir = dir;
  o.device = "cpu";
  o.max_model_len = 256;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 1024;
  o.num_threads = 2;
  auto ex = make_model_executor(config, o);
  const int64_t V = ex->vocab_size(), bs = ex->block_size();
  const auto S = static_cast<int32_t>(prompts.size());
  const int32_t blocks_per_seq = static_cast<int32_t>((o.max_model_len + bs - 1) / bs);
  ASSERT_GE(ex->num_kv_blocks(), S * blocks_per_seq);

  // Sequence s owns blocks [s*blocks_per_seq, (s+1)*blocks_per_seq), listed
  // in reverse to exercise the block table.
  auto block_of = [&](int32_t s, int32_t p) {
    return (s + 1) * blocks_per_seq - 1 - p / static_cast<int32_t>(bs);
  };
  std::vector<int32_t> len(static_cast<size_t>(S));
  std::vector<std::vector<int32_t>> got(static_cast<size_t>(S));
  std::vector<float> logits;
  for (size_t step = 0; step <= steps; ++step) {
    ForwardBatch b;
    b.max_blocks_per_seq = blocks_per_seq;
    b.query_start_loc.push_back(0);
    for (int32_t s = 0; s < S; ++s) {
      const auto& ids = step == 0 ? prompts[static_cast<size_t>(s)]
                                  : std::vector<int32_t>{got[static_cast<size_t>(s)].back()};
      for (int32_t id : ids) {
        const int32_t p = len[static_cast<size_t>(s)]++;
        b.input_ids.push_back(id);
        b.positions.push_back(p);
        b.slot_mapping.push_back(block_of(s, p) * static_cast<int32_t>(bs) + p % static_cast<int32_t>(bs));
      }
      b.query_start_loc.push_back(b.num_tokens());
      b.context_lens.push_back(len[static_cast<size_t>(s)]);
      for (int32_t k = 0; k < blocks_per_seq; ++k) b.block_tables.push_back(block_of(s, k * static_cast<int32_t>(bs)));
      b.logits_indices.push_back(b.num_tokens() - 1);
    }
    ex->execute(b, logits);
    ASSERT_EQ(logits.size(), static_cast<size_t>(S * V));
    if (step == steps) break;
    for (int32_t s = 0; s < S; ++s) {
      const float* row = logits.data() + s * V;
      got[static_cast<size_t>(s)].push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
    }
  }
  for (int32_t s = 0; s < S; ++s) {
    const auto& w = want[static_cast<size_t>(s)];
    EXPECT_EQ(got[static_cast<size_t>(s)], std::vector<int32_t>(w.begin(), w.begin() + static_cast<long>(steps)))
        << name << " prompt " << s;
  }
}

TEST(ModelBatchedGreedy, TinyRandomQwen2ChatMatchesTransformers) { check_batched_greedy("tiny-random-qwen2-chat", 12); }

TEST(ModelBatchedGreedy, TinyRandomChineseLlamaMatchesTransformers) {
  check_batched_greedy("tiny-random-chinese-llama", 16);
}

}  // namespace
}  // namespace pagoda::test
