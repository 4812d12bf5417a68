// GPTQ / AWQ checkpoints on the CUDA backend in fp16 and bf16 against HF
// transformers' float32 logits on the dequantized weights
// (shared/models/quantized/<m>/reference.json, written by an independent
// quantizer). fp16: last-position logits within issue 13's 5e-3 relative L2
// (reference.json's fp16_rel_l2, HF's own fp16 error, is ~1e-3). bf16: its
// unit roundoff is 8x fp16's and HF's own bf16 forward of the same-sized
// tiny-random-llama lands at 0.007-0.009 (that model's reference.json), so
// 5e-3 is out of reach for any bf16 forward; the bound is twice that recorded
// HF bf16 error, which still fails any layout mistake (a wrong zero point,
// packing order or act-order permutation gives errors of order 1). The next
// token must equal the reference's where the top-2 margin exceeds what the
// bound allows. The 32-token greedy continuations are decoded and their
// agreement printed: later margins are not recorded, so a late divergence is
// not a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/gpu/gpu_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

// The largest relative L2 error of HF transformers' own bf16 GPU forward
// against float32 over tiny-random-llama's reference sequences.
double hf_bf16_error_of_tiny_random_llama() {
  std::ifstream in(test::shared_model("tiny-random-llama") + "/reference.json");
  EXPECT_TRUE(in.good());
  const json ref = json::parse(in);
  double worst = 0;
  for (const json& seq : ref["sequences"])
    worst = std::max(worst, seq["bf16_gpu_rel_err_all_positions"].get<double>());
  return worst;
}

void check_quantized_cuda(const std::string& name, DType dt) {
  const std::string dir = test::shared_model("quantized/" + name);
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << dir;
  const json ref = json::parse(in);
  gputest::GpuModel m(dir, dt, 80, 1024);
  ASSERT_TRUE(m.config.quantization.enabled()) << name;
  // Every linear is kept packed (gpu/quant_linear.h): decode steps and
  // 1-token prompts run the int4/int8 GEMV, longer prompts the M > 8 path.
  EXPECT_EQ(m.model->load_stats().packed_linears, 7 * m.config.num_hidden_layers) << name;
  const auto V = static_cast<size_t>(m.config.vocab_size);
  const double kTol = dt == DType::BF16 ? 2 * hf_bf16_error_of_tiny_random_llama() : 5e-3;
  int cases = 0;
  for (const json& c : ref["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<double>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want.size(), V);
    const auto max_blocks = static_cast<int32_t>((ids.size() + greedy.size() + 15) / 16);
    std::vector<float> logits = m.run(test::one_seq_batch(ids, 0, 0, max_blocks));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << name;
    const double err = test::rel_l2(logits.data(), want);
    EXPECT_LT(err, kTol) << name << " " << dtype_name(dt) << " prompt of " << ids.size()
                         << " tokens";
    // An error of kTol relative L2 moves any one logit by at most
    // kTol * ||want||; twice that separates the top two safely.
    double norm = 0;
    for (double w : want) norm += w * w;
    const double bound = 2 * kTol * std::sqrt(norm);
    const double margin = c["top2_margin"].get<double>();
    const auto first =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (margin > bound)
      EXPECT_EQ(first, greedy[0]) << name << " " << dtype_name(dt) << " margin " << margin;
    size_t agree = 0;
    bool same = true;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const auto next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      same = same && next == greedy[step];
      if (same) ++agree;
      const auto pos = static_cast<int32_t>(ids.size());
      ids.push_back(next);
      logits = m.run(test::one_seq_batch({next}, pos, 0, max_blocks));
    }
    std::printf(
        "[quantized cuda] %s %s prompt %zu tokens: rel L2 %.3g (limit %.3g, HF fp16 %.3g), top-2 "
        "margin "
        "%.3g (checked above %.3g), greedy agrees for %zu/32 tokens\n",
        name.c_str(), dtype_name(dt), c["prompt_ids"].size(), err, kTol,
        c["fp16_rel_l2"].get<double>(), margin, bound, agree);
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

class CudaQuantized : public ::testing::TestWithParam<DType> {};

TEST_P(CudaQuantized, GptqLlama4Bit) {
  PAGODA_REQUIRE_GPU();
  check_quantized_cuda("tiny-gptq-llama", GetParam());
}
TEST_P(CudaQuantized, GptqQwen2ActOrder) {
  PAGODA_REQUIRE_GPU();
  check_quantized_cuda("tiny-gptq-qwen2-actorder", GetParam());
}
TEST_P(CudaQuantized, GptqQwen2Int8PerChannel) {
  PAGODA_REQUIRE_GPU();
  check_quantized_cuda("tiny-gptq-qwen2-int8", GetParam());
}
TEST_P(CudaQuantized, AwqLlama) {
  PAGODA_REQUIRE_GPU();
  check_quantized_cuda("tiny-awq-llama", GetParam());
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaQuantized, ::testing::Values(DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda
