// vLLM's max_num_seqs / max_num_batched_tokens defaults (server/batch_defaults.h),
// against the table in vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults
// and _set_default_max_num_seqs_and_batched_tokens_args).
#include "server/batch_defaults.h"

#include <gtest/gtest.h>

#include "server/engine_args.h"

namespace pagoda {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TargetDevice gpu(const char* name, double gib) {
  TargetDevice d;
  d.cuda = true;
  d.name = name;
  d.total_memory_bytes = static_cast<uint64_t>(gib * static_cast<double>(kGiB));
  return d;
}

BatchLimits unset(UsageContext u, const TargetDevice& d, int64_t tp = 1,
                  int64_t max_model_len = 4096) {
  return resolve_batch_limits(std::nullopt, std::nullopt, u, d, tp, max_model_len);
}

TEST(BatchDefaults, LargeGpusTakeVllmsLargerDefaults) {
  const TargetDevice h200 = gpu("NVIDIA H200", 139.8);
  BatchLimits l = unset(UsageContext::kLlmClass, h200);
  EXPECT_EQ(l.max_num_seqs, 1024);
  EXPECT_EQ(l.max_num_batched_tokens, 16384);
  EXPECT_TRUE(l.seqs_defaulted);
  EXPECT_TRUE(l.tokens_defaulted);
  l = unset(UsageContext::kOpenAiApiServer, h200);
  EXPECT_EQ(l.max_num_seqs, 1024);
  EXPECT_EQ(l.max_num_batched_tokens, 8192);
  // 70 GiB exactly is large (vLLM: device_memory >= 70 * GiB_bytes).
  EXPECT_EQ(unset(UsageContext::kOpenAiApiServer, gpu("NVIDIA H100 80GB HBM3", 70.0)).max_num_seqs,
            1024);
}

TEST(BatchDefaults, A100sAndSmallerGpusKeepTheSmallDefaults) {
  for (const TargetDevice& d : {gpu("NVIDIA A100-SXM4-80GB", 79.2), gpu("NVIDIA L4", 22.0),
                                gpu("NVIDIA H100 PCIe", 69.9)}) {
    SCOPED_TRACE(d.name);
    BatchLimits l = unset(UsageContext::kLlmClass, d);
    EXPECT_EQ(l.max_num_seqs, 256);
    EXPECT_EQ(l.max_num_batched_tokens, 8192);
    l = unset(UsageContext::kOpenAiApiServer, d);
    EXPECT_EQ(l.max_num_seqs, 256);
    EXPECT_EQ(l.max_num_batched_tokens, 2048);
  }
}

TEST(BatchDefaults, CpuDefaultsScaleWithTheTensorParallelSize) {
  const TargetDevice cpu;
  BatchLimits l = unset(UsageContext::kLlmClass, cpu, 2);
  EXPECT_EQ(l.max_num_seqs, 512);
  EXPECT_EQ(l.max_num_batched_tokens, 8192);
  l = unset(UsageContext::kOpenAiApiServer, cpu, 1);
  EXPECT_EQ(l.max_num_seqs, 128);
  EXPECT_EQ(l.max_num_batched_tokens, 2048);
}

TEST(BatchDefaults, DefaultTokensCappedBySeqsTimesContextAndSeqsByTokens) {
  const TargetDevice h200 = gpu("NVIDIA H200", 139.8);
  // max_num_seqs 4 given, context 512: tokens min(16384, 4 * 512).
  BatchLimits l = resolve_batch_limits(4, std::nullopt, UsageContext::kLlmClass, h200, 1, 512);
  EXPECT_EQ(l.max_num_seqs, 4);
  EXPECT_EQ(l.max_num_batched_tokens, 2048);
  // max_num_batched_tokens 100 given: the default seqs are capped at it.
  l = resolve_batch_limits(std::nullopt, 100, UsageContext::kOpenAiApiServer, h200, 1, 4096);
  EXPECT_EQ(l.max_num_seqs, 100);
  EXPECT_EQ(l.max_num_batched_tokens, 100);
  EXPECT_TRUE(l.seqs_defaulted);
  EXPECT_FALSE(l.tokens_defaulted);
  // A tiny context caps the default tokens (1024 seqs · 8 positions).
  EXPECT_EQ(unset(UsageContext::kLlmClass, h200, 1, 8).max_num_batched_tokens, 8192);
  EXPECT_EQ(unset(UsageContext::kLlmClass, h200, 1, 4).max_num_batched_tokens, 4096);
}

TEST(BatchDefaults, GivenValuesAreKeptAndFewerTokensThanSeqsRefusedAsVllm) {
  const TargetDevice h200 = gpu("NVIDIA H200", 139.8);
  BatchLimits l = resolve_batch_limits(300, 4000, UsageContext::kLlmClass, h200, 1, 4096);
  EXPECT_EQ(l.max_num_seqs, 300);
  EXPECT_EQ(l.max_num_batched_tokens, 4000);
  EXPECT_FALSE(l.seqs_defaulted);
  EXPECT_FALSE(l.tokens_defaulted);
  // A huge max_num_seqs: the default tokens stay the default (no overflow of
  // seqs · max_model_len), and the check names both as vLLM does.
  try {
    resolve_batch_limits(INT64_MAX, std::nullopt, UsageContext::kLlmClass, h200, 1, 4096);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "max_num_batched_tokens (16384) must be greater than or equal to max_num_seqs "
                 "(9223372036854775807).");
  }
  try {
    resolve_batch_limits(300, 50, UsageContext::kLlmClass, h200, 1, 4096);
    FAIL() << "50 tokens for 300 sequences accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(
        e.what(),
        "max_num_batched_tokens (50) must be greater than or equal to max_num_seqs (300).");
  }
}

TEST(BatchDefaults, EngineArgsLeaveBothUnsetAndValidateOnlyGivenOnes) {
  EngineArgs a;
  EXPECT_FALSE(a.max_num_seqs.has_value());
  EXPECT_FALSE(a.max_num_batched_tokens.has_value());
  EXPECT_NO_THROW(validate_engine_args(a, 64 * kGiB));
  a.max_num_seqs = 0;
  try {
    validate_engine_args(a, 64 * kGiB);
    FAIL() << "max_num_seqs 0 accepted";
  } catch (const EngineArgError& e) {
    EXPECT_EQ(e.arg, "max_num_seqs");
    EXPECT_STREQ(e.what(), "max_num_seqs must be >= 1, got 0");
  }
}

}  // namespace
}  // namespace pagoda
