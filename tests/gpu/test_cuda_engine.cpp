// The CUDA backend through the executor and the Engine: CUDA-graph decode
// replay against eager steps (bitwise logits, greedy ids), and the CUDA and
// CPU backends agreeing on greedy output for 32 concurrent mixed-length
// requests on stories260K in fp32 (issue 3). Skipped without a GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "engine/output_channel.h"
#include "gpu/cuda_graphs.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

const std::string kStories = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";

ExecutorOptions stories_options(const std::string& device, bool eager) {
  ExecutorOptions o;
  o.model_dir = kStories;
  o.device = device;
  o.dtype = "float32";
  o.num_threads = 1;
  o.block_size = 16;
  o.max_model_len = 256;
  o.max_num_seqs = 32;
  o.max_num_batched_tokens = 512;
  o.num_gpu_blocks_override = 400;
  o.enforce_eager = eager;
  return o;
}

// A decode step over five sequences of different lengths after their
// prefill: the graphed executor (batch 5 padded to 8) returns the same
// logits, bit for bit, as the eager one.
TEST(CudaGraphs, DecodeReplayEqualsEagerBitwise) {
  PAGODA_REQUIRE_GPU();
  const ModelConfig cfg = ModelConfig::from_dir(kStories);
  const std::vector<int32_t> lens = {3, 17, 1, 40, 200};
  auto run = [&](bool eager, int64_t* graphs) {
    auto ex = make_model_executor(cfg, stories_options("cuda", eager));
    *graphs = ex->num_cuda_graphs();
    ForwardBatch pre, dec;
    const int32_t mb = 16;  // blocks per sequence: i * 16 ...
    pre.max_blocks_per_seq = dec.max_blocks_per_seq = mb;
    pre.query_start_loc = {0};
    dec.query_start_loc = {0};
    for (size_t i = 0; i < lens.size(); ++i) {
      for (int32_t p = 0; p < lens[i]; ++p) {
        pre.input_ids.push_back(static_cast<int32_t>((p * 37 + static_cast<int32_t>(i) * 11) % cfg.vocab_size));
        pre.positions.push_back(p);
        pre.slot_mapping.push_back(static_cast<int32_t>(i) * mb * 16 + p);
      }
      pre.query_start_loc.push_back(pre.num_tokens());
      pre.context_lens.push_back(lens[i]);
      pre.logits_indices.push_back(pre.num_tokens() - 1);
      dec.input_ids.push_back(static_cast<int32_t>((i * 97 + 5) % cfg.vocab_size));
      dec.positions.push_back(lens[i]);
      dec.slot_mapping.push_back(static_cast<int32_t>(i) * mb * 16 + lens[i]);
      dec.query_start_loc.push_back(static_cast<int32_t>(i + 1));
      dec.context_lens.push_back(lens[i] + 1);
      dec.logits_indices.push_back(static_cast<int32_t>(i));
      for (int32_t k = 0; k < mb; ++k) {
        pre.block_tables.push_back(static_cast<int32_t>(i) * mb + k);
        dec.block_tables.push_back(static_cast<int32_t>(i) * mb + k);
      }
    }
    std::vector<float> lp, ld;
    ex->execute(pre, lp);
    ex->execute(dec, ld);
    return ld;
  };
  int64_t g_graphed = 0, g_eager = 0;
  const std::vector<float> graphed = run(false, &g_graphed);
  const std::vector<float> eager = run(true, &g_eager);
  EXPECT_EQ(g_eager, 0);
  // capture sizes for max_num_seqs 32: 1, 2, 4, 8, 16, 24, 32
  EXPECT_EQ(g_graphed, 7);
  ASSERT_EQ(graphed.size(), eager.size());
  ASSERT_EQ(graphed.size(), lens.size() * static_cast<size_t>(cfg.vocab_size));
  size_t diff = 0;
  for (size_t i = 0; i < graphed.size(); ++i) diff += graphed[i] != eager[i] || std::isnan(graphed[i]);
  EXPECT_EQ(diff, 0u) << "logits differing between graph replay and eager";
}

struct EngineRun {
  std::vector<std::vector<int32_t>> ids;
  int64_t graphs = 0;
};

// 32 requests at once: prompts are prefixes (1..~120 tokens) of the llama2.c
// reference stories, output lengths 8..63, all greedy with ignore_eos.
// n requests (32: mixed lengths to 120 tokens, 8-63 out; more: vLLM-default
// sized decode batches, prompts of 1-8 tokens and 30-49 out, so most steps
// decode every sequence at once) with max_num_seqs n.
EngineRun run_engine(const std::string& device, bool eager, int n = 32) {
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  EXPECT_TRUE(in.good());
  const nlohmann::json vec = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> texts;
  for (const nlohmann::json& c : vec["cases"]) {
    std::vector<int32_t> t = c["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t id : c["greedy_ids"].get<std::vector<int32_t>>()) t.push_back(id);
    texts.push_back(t);
  }
  ExecutorOptions opts = stories_options(device, eager);
  const bool wide = n > 32;
  if (wide) {
    opts.max_num_seqs = n;
    opts.max_num_batched_tokens = 2 * n;
    opts.num_gpu_blocks_override = 4 * n;  // 64 positions a sequence, no preemption
  }
  EngineConfig ec;
  ec.max_model_len = opts.max_model_len;
  ec.max_num_seqs = opts.max_num_seqs;
  ec.max_num_batched_tokens = opts.max_num_batched_tokens;
  ec.log_stats = false;
  auto ex = make_model_executor(ModelConfig::from_dir(kStories), opts);
  EngineRun r;
  r.graphs = ex->num_cuda_graphs();
  Engine engine(ec, std::move(ex), load_tokenizer(kStories));
  std::vector<std::shared_ptr<OutputChannel>> chans;
  const auto max_tokens = [wide](int64_t i) { return wide ? 30 + i % 20 : 8 + (i * 13) % 56; };
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t>& t = texts[static_cast<size_t>(i) % texts.size()];
    const size_t len =
        std::min(t.size(), static_cast<size_t>(wide ? 1 + i % 8 : 1 + (i * 37) % 120));
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = "r" + std::to_string(i);
    req->prompt_token_ids.assign(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(len));
    req->sampling.temperature = 0.0f;
    req->sampling.ignore_eos = true;
    req->sampling.max_tokens = static_cast<int32_t>(max_tokens(i));
    req->output = std::make_shared<OutputChannel>();
    chans.push_back(req->output);
    engine.add_request(std::move(req));
  }
  engine.run_until_idle();
  for (size_t k = 0; k < chans.size(); ++k) {
    RequestOutput got = collect(*chans[k]);
    EXPECT_EQ(got.error, "") << device << " request " << k;
    EXPECT_EQ(static_cast<int64_t>(got.token_ids.size()), max_tokens(static_cast<int64_t>(k)));
    r.ids.push_back(got.token_ids);
  }
  return r;
}

TEST(CudaEngine, CudaAndCpuAgreeOnGreedyFor32ConcurrentRequestsFp32) {
  PAGODA_REQUIRE_GPU();
  const EngineRun cpu = run_engine("cpu", true);
  const EngineRun cuda = run_engine("cuda", false);
  EXPECT_EQ(cpu.graphs, 0);
  EXPECT_GT(cuda.graphs, 0);
  ASSERT_EQ(cpu.ids.size(), 32u);
  ASSERT_EQ(cuda.ids.size(), 32u);
  for (size_t k = 0; k < cpu.ids.size(); ++k) EXPECT_EQ(cuda.ids[k], cpu.ids[k]) << "request " << k;
}

TEST(CudaEngine, GraphedAndEagerGreedyIdsEqual) {
  PAGODA_REQUIRE_GPU();
  const EngineRun graphed = run_engine("cuda", false);
  const EngineRun eager = run_engine("cuda", true);
  EXPECT_GT(graphed.graphs, 0);
  EXPECT_EQ(eager.graphs, 0);
  ASSERT_EQ(graphed.ids.size(), 32u);
  for (size_t k = 0; k < graphed.ids.size(); ++k) EXPECT_EQ(graphed.ids[k], eager.ids[k]) << "request " << k;
}

// vLLM's capture sizes: 1, 2, 4, multiples of 8 below 256, of 16 from 256,
// up to min(max_num_seqs, 512), the cap itself added.
TEST(CudaGraphs, CaptureSizesAreVllmsCappedAt512) {
  EXPECT_EQ(cuda::DecodeGraphs::capture_sizes(20), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
  const std::vector<int64_t> s = cuda::DecodeGraphs::capture_sizes(1024);
  ASSERT_EQ(s.size(), 3u + 31u + 17u);
  EXPECT_EQ(s[33], 248);
  EXPECT_EQ(s[34], 256);
  EXPECT_EQ(s[35], 272);
  EXPECT_EQ(s.back(), 512);
  EXPECT_EQ(cuda::DecodeGraphs::capture_sizes(300).back(), 300);
  EXPECT_EQ(cuda::DecodeGraphs::capture_sizes(300)[34], 256);
}

// 600 sequences decoding at once (vLLM's default max_num_seqs on an H200 is
// 1024): batches above the largest graph (512) run eagerly in buffers
// reserved for max_num_seqs, and the greedy ids equal the CPU backend's.
TEST(CudaEngine, DecodeBatchesBeyondTheLargestGraphMatchTheCpu) {
  PAGODA_REQUIRE_GPU();
  const EngineRun cuda = run_engine("cuda", false, 600);
  const EngineRun cpu = run_engine("cpu", true, 600);
  EXPECT_EQ(cuda.graphs, static_cast<int64_t>(cuda::DecodeGraphs::capture_sizes(600).size()));
  ASSERT_EQ(cuda.ids.size(), 600u);
  ASSERT_EQ(cpu.ids.size(), 600u);
  for (size_t k = 0; k < cpu.ids.size(); ++k) EXPECT_EQ(cuda.ids[k], cpu.ids[k]) << "request " << k;
}

}  // namespace
}  // namespace pagoda
