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

}  // namespace
}  // namespace pagoda
