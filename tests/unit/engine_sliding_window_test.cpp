// Sliding-window KV release (SchedulerConfig::sliding_window, vLLM v1's
// SlidingWindowManager): on tiny-random-mistral (every layer windowed at 24
// positions; shared/models/arch, HF transformers reference), the engine on
// the CPU backend with blocks of 4 and 32-token prefill chunks releases the
// blocks before each sequence's window, and still gives HF's greedy ids for
// the reference's four prompts (1 to 200 tokens, 24 new each), with and
// without prefix caching. The 200-token sequence ends holding 8 blocks
// where it held 56 before. The rotary
// frequencies are rounded to bf16 as the reference's model held them (see
// model_arch_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "engine/output_channel.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_engine.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

TEST(EngineSlidingWindow, ReleasedBlocksLeaveHfGreedyIdsUnchanged) {
  const std::string dir = shared_model("arch/tiny-random-mistral");
  std::ifstream in(fmt::format("{}/reference.json", dir));
  ASSERT_TRUE(in.good()) << dir;
  const nlohmann::json ref = nlohmann::json::parse(in);
  ModelConfig mc = ModelConfig::from_dir(dir);
  mc.rope_inv_freq_bf16 = true;
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    ExecutorOptions opts = stories_options();  // CPU, 1 thread; this model and limits below
    opts.model_dir = dir;
    opts.block_size = 4;
    opts.max_model_len = 256;
    opts.max_num_seqs = 4;
    opts.max_num_batched_tokens = 32;
    EngineConfig cfg = test_engine_config(opts);
    cfg.enable_prefix_caching = caching;
    auto exec = make_model_executor(mc, opts);
    ASSERT_EQ(exec->uniform_sliding_window(), 24);
    Engine e(cfg, std::move(exec), load_tokenizer(dir));
    std::vector<std::shared_ptr<OutputChannel>> chans;
    int i = 0;
    for (const nlohmann::json& c : ref.at("cases"))
      chans.push_back(add_greedy_request(e, fmt::format("p{}", i++),
                                         c.at("prompt_ids").get<std::vector<int32_t>>(), 24));
    // KV blocks in use after each step; the last positive count is the
    // 200-token prompt's alone (it finishes last: its prefill takes 7 of
    // the 32-token steps).
    int64_t last_in_use = 0;
    while (e.step())
      if (e.stats().kv_blocks_used > 0) last_in_use = e.stats().kv_blocks_used;
    for (size_t k = 0; k < chans.size(); ++k) {
      const RequestOutput got = collect(*chans[k]);
      ASSERT_TRUE(got.finished);
      EXPECT_EQ(got.error, "");
      EXPECT_EQ(got.token_ids, ref.at("cases")[k].at("greedy_ids").get<std::vector<int32_t>>())
          << "prompt of " << ref.at("cases")[k].at("prompt_ids").size() << " tokens";
    }
    // Unreleased, the 200-token sequence holds 56 blocks at its last step;
    // released, the 7 blocks its window spans and the one it writes.
    EXPECT_GT(last_in_use, 0);
    EXPECT_LE(last_in_use, 8) << "out-of-window blocks were not released";
    EXPECT_EQ(e.stats().kv_blocks_used, 0);
  }
}

}  // namespace
}  // namespace pagoda::test
