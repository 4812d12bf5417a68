// --swap-space (GiB) and --preemption-mode recompute|swap, vLLM's flags, on
// `pagoda serve` and `pagoda generate`: defaults, values, and a clear error
// for a bad value.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/sched/preemption_mode.h"
#include "server/cli.h"
#include "tests/unit/server_cli_test_helpers.h"

namespace pagoda {
namespace {

using Parsed = test::ParsedCli;
const auto parse = test::parse_cli;

// The CLI11 error message for args (empty when they parse).
std::string parse_error(std::vector<std::string> args) {
  Parsed p;
  try {
    parse(std::move(args), p);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ServerCli, SwapFlagsDefaultToVllms) {
  Parsed a;
  parse({"serve"}, a);
  EXPECT_EQ(a.serve.engine.swap_space, 4.0);
  EXPECT_EQ(a.serve.engine.preemption_mode, "");  // vLLM's rule
  EXPECT_EQ(parse_preemption_mode(a.serve.engine.preemption_mode), std::nullopt);
}

TEST(ServerCli, SwapFlagsParseOnServeAndGenerate) {
  Parsed a;
  parse({"serve", "--swap-space", "0.5", "--preemption-mode", "swap"}, a);
  EXPECT_EQ(a.serve.engine.swap_space, 0.5);
  EXPECT_EQ(parse_preemption_mode(a.serve.engine.preemption_mode), PreemptionMode::kSwap);
  Parsed b;
  parse({"generate", "--prompt", "hi", "--preemption-mode=recompute", "--swap-space=0"}, b);
  EXPECT_EQ(b.gen.engine.swap_space, 0.0);
  EXPECT_EQ(parse_preemption_mode(b.gen.engine.preemption_mode), PreemptionMode::kRecompute);
}

TEST(ServerCli, BadSwapFlagValuesAreClearErrors) {
  const std::string mode = parse_error({"serve", "--preemption-mode", "evict"});
  EXPECT_NE(mode.find("--preemption-mode"), std::string::npos) << mode;
  EXPECT_NE(mode.find("evict"), std::string::npos) << mode;
  const std::string neg = parse_error({"serve", "--swap-space", "-1"});
  EXPECT_NE(neg.find("--swap-space"), std::string::npos) << neg;
  const std::string word = parse_error({"generate", "--prompt", "x", "--swap-space", "lots"});
  EXPECT_NE(word.find("--swap-space"), std::string::npos) << word;
  EXPECT_THROW(parse_preemption_mode("Swap"), std::invalid_argument);
}

// vLLM's bound on the swap space (CacheConfig.verify_with_parallel_config):
// above 70% of the machine's memory an error naming swap_space, above 40% a
// warning; nothing allocated (recompute), nothing checked.
TEST(ServerCli, SwapSpaceIsBoundedByTheMachinesMemory) {
  const uint64_t ten_gib = uint64_t{10} << 30;
  EngineArgs a;
  a.swap_space = 4.0;
  EXPECT_EQ(check_swap_space(a, ten_gib), "");
  EXPECT_NO_THROW(validate_engine_args(a, ten_gib));
  a.swap_space = 5.0;
  EXPECT_EQ(check_swap_space(a, ten_gib),
            "Possibly too large swap space. 5.00 GiB out of the 10.00 GiB total CPU memory is "
            "allocated for the swap space.");
  EXPECT_NO_THROW(validate_engine_args(a, ten_gib));
  a.swap_space = 7.5;
  try {
    validate_engine_args(a, ten_gib);
    ADD_FAILURE() << "no error";
  } catch (const EngineArgError& e) {
    EXPECT_EQ(e.arg, "swap_space");
    EXPECT_EQ(std::string(e.what()),
              "Too large swap space. 7.50 GiB out of the 10.00 GiB total CPU memory is allocated "
              "for the swap space. (at most 70% of it)");
  }
  a.preemption_mode = "recompute";
  EXPECT_EQ(check_swap_space(a, ten_gib), "");
  EXPECT_NO_THROW(validate_engine_args(a, ten_gib));
}

// On the command line, against this machine's memory: exit 2 (main.cpp)
// before anything loads, the flag named.
TEST(ServerCli, HugeSwapSpaceIsAUsageError) {
  for (const char* gib : {"1e12", "1000000"}) {
    const std::string e = parse_error({"serve", "--swap-space", gib});
    EXPECT_EQ(e.rfind("--swap-space: Too large swap space.", 0), 0u) << e;
    const std::string g = parse_error({"generate", "--prompt", "x", "--swap-space", gib});
    EXPECT_EQ(g.rfind("--swap-space: Too large swap space.", 0), 0u) << g;
  }
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// vLLM's --long-prefill-token-threshold (SchedulerConfig): default 0 (off),
// a value on serve and generate, negative refused naming the flag.
TEST(ServerCli, LongPrefillTokenThreshold) {
  Parsed a;
  parse({"serve"}, a);
  EXPECT_EQ(a.serve.engine.long_prefill_token_threshold, 0);
  parse({"serve", "--long-prefill-token-threshold", "512"}, a);
  EXPECT_EQ(a.serve.engine.long_prefill_token_threshold, 512);
  Parsed b;
  parse({"generate", "--prompt", "hi", "--long-prefill-token-threshold=64"}, b);
  EXPECT_EQ(b.gen.engine.long_prefill_token_threshold, 64);
  const std::string neg = parse_error({"serve", "--long-prefill-token-threshold", "-1"});
  EXPECT_NE(neg.find("--long-prefill-token-threshold"), std::string::npos) << neg;
}

// --max-prefill-tokens-with-decodes (Pagoda's): off by default on serve and
// generate, a value on either, negative refused naming the flag.
TEST(ServerCli, MaxPrefillTokensWithDecodes) {
  Parsed a;
  parse({"serve"}, a);
  EXPECT_EQ(a.serve.engine.max_prefill_tokens_with_decodes, 0);
  parse({"serve", "--max-prefill-tokens-with-decodes", "384"}, a);
  EXPECT_EQ(a.serve.engine.max_prefill_tokens_with_decodes, 384);
  Parsed b;
  parse({"generate", "--prompt", "hi"}, b);
  EXPECT_EQ(b.gen.engine.max_prefill_tokens_with_decodes, 0);
  parse({"generate", "--prompt", "hi", "--max-prefill-tokens-with-decodes=256"}, b);
  EXPECT_EQ(b.gen.engine.max_prefill_tokens_with_decodes, 256);
  const std::string neg = parse_error({"serve", "--max-prefill-tokens-with-decodes=-5"});
  EXPECT_NE(neg.find("--max-prefill-tokens-with-decodes"), std::string::npos) << neg;
}

}  // namespace
}  // namespace pagoda
