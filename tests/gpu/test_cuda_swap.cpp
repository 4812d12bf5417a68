// Preemption by swap on the CUDA backend: pinned host blocks and
// cudaMemcpyAsync runs move every layer's K and V out and back bit for bit;
// and through the Engine, tiny-random-llama's greedy ids are the same with
// no preemption, with recompute and with swap under a KV pool small enough
// to force many preemptions (the engine counts them; a recomputed sequence
// also reads its partial block back through copy_blocks, tested alone
// too). Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine/model/llama.h"
#include "engine/model/model_config.h"
#include "engine/output_channel.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

TEST(CudaSwap, BlocksRoundTripThroughPinnedHostMemoryBitForBit) {
  PAGODA_REQUIRE_GPU();
  constexpr int64_t kBlocks = 8, kBs = 16, kHk = 2, kD = 64, kLayers = 3;
  constexpr size_t kBlockElems = kBs * kHk * kD;
  auto be = make_cuda_backend(0, DType::F32);
  std::vector<LayerKVCache> dev(kLayers);
  std::vector<std::vector<float>> want(kLayers * 2);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      Tensor t = be->alloc(DType::F32, {kBlocks, kBs, kHk, kD});
      std::vector<float>& h = want[static_cast<size_t>(l * 2 + kv)];
      h.resize(static_cast<size_t>(t.numel()));
      for (float& x : h) x = d(rng);
      be->copy_from_host(t, h.data(), DType::F32);
      (kv == 0 ? dev[static_cast<size_t>(l)].k : dev[static_cast<size_t>(l)].v) = t;
    }
  }
  HostKVCache host = be->alloc_host_kv_cache(kLayers, 6, kBlockElems * sizeof(float));
  // A run of three (0, 1, 2 -> host 3, 4, 5) and two singles.
  const std::vector<BlockSwap> out = {{0, 3}, {1, 4}, {2, 5}, {6, 0}, {4, 1}};
  be->swap_out(dev, host, out);
  for (LayerKVCache& c : dev) {
    be->fill_zero(c.k);
    be->fill_zero(c.v);
  }
  // Back into other blocks, ordered on the stream after the swap-out.
  const std::vector<BlockSwap> in = {{5, 3}, {6, 4}, {7, 5}, {1, 0}, {0, 1}};
  be->swap_in(dev, host, in);
  std::vector<float> got(kBlocks * kBlockElems);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const LayerKVCache& c = dev[static_cast<size_t>(l)];
      be->copy_to_host(got.data(), kv == 0 ? c.k : c.v);
      const std::vector<float>& w = want[static_cast<size_t>(l * 2 + kv)];
      for (size_t i = 0; i < in.size(); ++i)
        EXPECT_EQ(std::memcmp(got.data() + static_cast<size_t>(in[i].device) * kBlockElems,
                              w.data() + static_cast<size_t>(out[i].device) * kBlockElems,
                              kBlockElems * sizeof(float)),
                  0)
            << "layer " << l << " kv " << kv << " pair " << i;
      EXPECT_EQ(got[2 * kBlockElems], 0.0f);  // block 2 was not swapped back in
    }
  be->free_host_kv_cache(host);
  for (LayerKVCache& c : dev) {
    be->free(c.k);
    be->free(c.v);
  }
}

// Backend::copy_blocks (a cached partial block continued by a new
// sequence): every layer's K and V of each src block into its dst block,
// ordered on the stream after the writes before it; other blocks untouched.
TEST(CudaSwap, CopyBlocksCopiesEveryLayerAndNothingElse) {
  PAGODA_REQUIRE_GPU();
  constexpr int64_t kBlocks = 8, kBs = 16, kHk = 2, kD = 64, kLayers = 3;
  constexpr size_t kBlockElems = kBs * kHk * kD;
  for (DType dt : {DType::F32, DType::BF16}) {
    auto be = make_cuda_backend(0, dt);
    std::vector<LayerKVCache> dev(kLayers);
    std::vector<std::vector<float>> want(kLayers * 2);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t l = 0; l < kLayers; ++l)
      for (int kv = 0; kv < 2; ++kv) {
        Tensor t = be->alloc(dt, {kBlocks, kBs, kHk, kD});
        std::vector<float>& h = want[static_cast<size_t>(l * 2 + kv)];
        h.resize(static_cast<size_t>(t.numel()));
        for (float& x : h) x = d(rng);
        be->copy_from_host(t, h.data(), DType::F32);
        be->copy_to_host(h.data(), t);  // as stored (bf16-rounded)
        (kv == 0 ? dev[static_cast<size_t>(l)].k : dev[static_cast<size_t>(l)].v) = t;
      }
    // Block 3 into 5 and 6 (two continuations of one block), 0 into 7.
    const std::vector<BlockCopy> copies = {{3, 5}, {3, 6}, {0, 7}};
    be->copy_blocks(dev, copies);
    EXPECT_THROW(be->copy_blocks(dev, std::vector<BlockCopy>{{2, 2}}), std::invalid_argument);
    EXPECT_THROW(be->copy_blocks(dev, std::vector<BlockCopy>{{0, kBlocks}}), std::invalid_argument);
    std::vector<float> got(kBlocks * kBlockElems);
    for (int64_t l = 0; l < kLayers; ++l)
      for (int kv = 0; kv < 2; ++kv) {
        const LayerKVCache& c = dev[static_cast<size_t>(l)];
        be->copy_to_host(got.data(), kv == 0 ? c.k : c.v);
        const std::vector<float>& w = want[static_cast<size_t>(l * 2 + kv)];
        std::vector<float> expect = w;
        for (const BlockCopy& p : copies)
          std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(p.src * kBlockElems), kBlockElems,
                      expect.begin() + static_cast<std::ptrdiff_t>(p.dst * kBlockElems));
        EXPECT_EQ(got, expect) << dtype_name(dt) << " layer " << l << " kv " << kv;
      }
    for (LayerKVCache& c : dev) {
      be->free(c.k);
      be->free(c.v);
    }
  }
}

// Many pairs in one call (a beam-search step continues a partial block per
// beam): 1,500 copies over 4 layers, the argument buffer grown past its
// first size, then a small call after it; every dst holds its src.
TEST(CudaSwap, CopyBlocksManyPairsInOneCall) {
  PAGODA_REQUIRE_GPU();
  constexpr int64_t kBlocks = 3100, kBs = 16, kHk = 1, kD = 16, kLayers = 4;
  constexpr size_t kBlockElems = kBs * kHk * kD;
  auto be = make_cuda_backend(0, DType::F32);
  std::vector<LayerKVCache> dev(kLayers);
  std::vector<std::vector<float>> want(kLayers * 2);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      Tensor t = be->alloc(DType::F32, {kBlocks, kBs, kHk, kD});
      std::vector<float>& h = want[static_cast<size_t>(l * 2 + kv)];
      h.resize(static_cast<size_t>(t.numel()));
      for (size_t i = 0; i < h.size(); ++i)
        h[i] = static_cast<float>(i) + 0.25f * static_cast<float>(l * 2 + kv);
      be->copy_from_host(t, h.data(), DType::F32);
      (kv == 0 ? dev[static_cast<size_t>(l)].k : dev[static_cast<size_t>(l)].v) = t;
    }
  std::vector<BlockCopy> big, small = {{7, 3099}};
  for (int32_t i = 0; i < 1500; ++i)
    big.push_back({i % 1000, 1500 + i});  // srcs shared by up to 2 dsts
  for (const std::vector<BlockCopy>* copies : {&big, &small}) {
    be->copy_blocks(dev, *copies);
    for (auto& w : want)
      for (const BlockCopy& p : *copies)
        std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(p.src * kBlockElems), kBlockElems,
                    w.begin() + static_cast<std::ptrdiff_t>(p.dst * kBlockElems));
  }
  std::vector<float> got(kBlocks * kBlockElems);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const LayerKVCache& c = dev[static_cast<size_t>(l)];
      be->copy_to_host(got.data(), kv == 0 ? c.k : c.v);
      EXPECT_EQ(got, want[static_cast<size_t>(l * 2 + kv)]) << "layer " << l << " kv " << kv;
    }
  for (LayerKVCache& c : dev) {
    be->free(c.k);
    be->free(c.v);
  }
}

struct SwapRun {
  std::vector<std::vector<int32_t>> ids;
  EngineStats stats;
};

// 24 greedy requests on tiny-random-llama (fp32, CUDA graphs on) with
// `kv_blocks` blocks of 16 and `host_blocks` swap blocks.
SwapRun run(int64_t kv_blocks, int64_t host_blocks, std::optional<PreemptionMode> mode) {
  const std::string dir = test::shared_model("tiny-random-llama");
  const ModelConfig cfg = ModelConfig::from_dir(dir);
  ExecutorOptions o;
  o.model_dir = dir;
  o.device = "cuda";
  o.dtype = "float32";
  o.block_size = 16;
  o.max_model_len = 256;
  o.max_num_seqs = 16;
  o.max_num_batched_tokens = 256;
  o.num_gpu_blocks_override = kv_blocks;
  o.swap_space_bytes =
      static_cast<size_t>(host_blocks) * LlamaModel::kv_bytes_per_block(cfg, 16, DType::F32);
  EngineConfig ec;
  ec.max_model_len = o.max_model_len;
  ec.max_num_seqs = o.max_num_seqs;
  ec.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.log_stats = false;
  ec.preemption_mode = mode;
  ec.check_invariants = true;
  // tiny-random-llama has no tokenizer; stories260K's has its vocabulary size (512).
  Engine engine(ec, make_model_executor(cfg, o),
                load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K"));
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> tok(3, 511);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  for (int i = 0; i < 24; ++i) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = fmt::format("r{}", i);
    for (int k = 0; k < 10 + (i * 23) % 90; ++k) req->prompt_token_ids.push_back(tok(rng));
    req->sampling.temperature = 0.0f;
    req->sampling.ignore_eos = true;
    req->sampling.max_tokens = 64;
    req->output = std::make_shared<OutputChannel>();
    chans.push_back(req->output);
    engine.add_request(std::move(req));
  }
  engine.run_until_idle();
  SwapRun r;
  for (auto& ch : chans) {
    const RequestOutput got = collect(*ch);
    EXPECT_EQ(got.error, "");
    EXPECT_EQ(got.token_ids.size(), 64u);
    r.ids.push_back(got.token_ids);
  }
  r.stats = engine.stats();
  EXPECT_EQ(r.stats.kv_blocks_used, 0);
  EXPECT_EQ(r.stats.cpu_kv_blocks_used, 0);
  return r;
}

TEST(CudaSwap, GreedyIdsAreTheSameWithoutPreemptionWithRecomputeAndWithSwap) {
  PAGODA_REQUIRE_GPU();
  const SwapRun none = run(400, 0, PreemptionMode::kRecompute);
  EXPECT_EQ(none.stats.num_preemptions_total, 0);
  // 24 blocks: 384 slots for 24 requests of up to 163 tokens.
  const SwapRun recompute = run(24, 0, PreemptionMode::kRecompute);
  EXPECT_GT(recompute.stats.num_preemptions_total, 0);
  const SwapRun swap = run(24, 256, PreemptionMode::kSwap);
  EXPECT_GT(swap.stats.num_swap_outs_total, 0);
  EXPECT_EQ(swap.stats.num_swap_ins_total, swap.stats.num_swap_outs_total);
  EXPECT_EQ(swap.stats.cpu_kv_blocks_total, 256);
  EXPECT_EQ(recompute.ids, none.ids);
  EXPECT_EQ(swap.ids, none.ids);
  std::printf("[ swap ] preemptions: recompute %lld, swap %lld (%lld swapped out)\n",
              static_cast<long long>(recompute.stats.num_preemptions_total),
              static_cast<long long>(swap.stats.num_preemptions_total),
              static_cast<long long>(swap.stats.num_swap_outs_total));
}

}  // namespace
}  // namespace pagoda
