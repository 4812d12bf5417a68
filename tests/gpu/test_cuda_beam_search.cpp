// Beam search on the CUDA engine (fp32, CUDA graphs on) against HF
// transformers' beams (tests/support/beam_reference.h): the same tokens in
// the same order, scores within 1e-4. And a beam step runs on the decode
// fast path: each step after the prompt's is one new request per beam whose
// blocks (full ones from the prefix cache, the partial one copied) hold all
// but its new token, so the engine step is one token per sequence and
// replays a captured decode graph — counted by the executor.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/beam_reference.h"
#include "tests/support/test_engine.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

void check_model_on_cuda(const std::string& name, const std::string& dir) {
  ExecutorOptions o = test::stories_options("cuda");
  o.model_dir = dir;
  o.dtype = "float32";
  o.max_num_batched_tokens = 256;
  o.enforce_eager = false;
  EngineConfig cfg;
  cfg.max_model_len = o.max_model_len;
  cfg.max_num_seqs = o.max_num_seqs;
  cfg.max_num_batched_tokens = o.max_num_batched_tokens;
  cfg.log_stats = false;
  std::unique_ptr<ModelExecutor> ex = make_model_executor(ModelConfig::from_dir(dir), o);
  ASSERT_GT(ex->num_cuda_graphs(), 0) << "no decode graphs captured";
  const ModelExecutor* exec = ex.get();
  // tiny-random-llama has no tokenizer of its own: stories260K's.
  Engine engine(cfg, std::move(ex), load_tokenizer(test::stories_dir()));
  const int64_t steps0 = engine.stats().steps_total, replays0 = exec->num_graph_replays();
  EXPECT_EQ(test::check_beam_reference(engine, name, 1e-4), 18);
  const int64_t steps = engine.stats().steps_total - steps0;
  const int64_t replays = exec->num_graph_replays() - replays0;
  // 18 searches: only the step that prefills a search's prompt (several
  // tokens) runs eagerly; every beam step replays a graph.
  EXPECT_GT(steps, 18 * 2);
  EXPECT_GE(replays, steps - 18) << steps << " engine steps, " << replays << " graph replays";
}

TEST(CudaBeamSearch, MatchesTransformersOnStories260KAndBeamStepsReplayGraphs) {
  PAGODA_REQUIRE_GPU();
  check_model_on_cuda("stories260K", test::stories_dir());
}

TEST(CudaBeamSearch, MatchesTransformersOnTinyRandomLlamaAndBeamStepsReplayGraphs) {
  PAGODA_REQUIRE_GPU();
  const std::string dir = test::shared_model("tiny-random-llama");
  if (!std::ifstream(dir + "/config.json"))
    GTEST_SKIP() << dir << " not found (../shared test assets)";
  check_model_on_cuda("tiny-random-llama", dir);
}

}  // namespace
}  // namespace pagoda
