// Integer flags of `pagoda serve` and `pagoda generate` out of their range
// are usage errors naming the flag and the range (exit 2 in main.cpp), as
// vLLM refuses them: --port beyond 0-65535 (uvicorn cannot bind it; CLI11
// said "Could not convert: --port = 70000"), --seed outside numpy's
// [0, 2**32 - 1] (vLLM seeds np.random with it and fails at startup; "-1"
// was read as 2**64 - 1 and served), a negative --max-connections (read
// as SIZE_MAX: no limit), and the engine's counts (max_num_seqs,
// block_size, tensor_parallel_size >= 1, as vLLM's EngineArgs checks).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "server/cli.h"
#include "tests/unit/server_cli_test_helpers.h"

namespace pagoda {
namespace {

// What parse_cli throws for `args`, "" when it parses.
std::string parse_error(std::vector<std::string> args) {
  try {
    test::ParsedCli p;
    test::parse_cli(std::move(args), p);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ServerCliRanges, OutOfRangeValuesNameTheFlagAndTheRange) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"serve", "--port", "70000"}, "--port: must be in [0, 65535], got 70000"},
      {{"serve", "--port", "-1"}, "--port: must be in [0, 65535], got -1"},
      {{"serve", "--seed", "-1"},
       "--seed: must be in [0, 4294967295], got -1 (numpy's seed range; vLLM seeds np.random "
       "with it)"},
      {{"generate", "--seed", "4294967296"},
       "--seed: must be in [0, 4294967295], got 4294967296 (numpy's seed range; vLLM seeds "
       "np.random with it)"},
      {{"serve", "--max-connections", "-1"}, "--max-connections: must be >= 0, got -1"},
      {{"serve", "--max-num-seqs", "0"}, "--max-num-seqs: max_num_seqs must be >= 1, got 0"},
      {{"serve", "--block-size", "0"}, "--block-size: block_size must be >= 1, got 0"},
      {{"generate", "--tensor-parallel-size", "0"},
       "--tensor-parallel-size: tensor_parallel_size must be >= 1, got 0"},
      {{"serve", "--network-threads", "0"}, "--network-threads: must be in [1, 256], got 0"},
      {{"serve", "--shutdown-timeout", "-1"}, "--shutdown-timeout: must be in [0, 86400], got -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[1] + " " + c.args[2]);
    EXPECT_EQ(parse_error(c.args), c.message);
  }
  // The bounds themselves are accepted.
  test::ParsedCli p;
  test::parse_cli({"serve", "--port", "65535", "--seed", "4294967295"}, p);
  EXPECT_EQ(p.serve.port, 65535);
  EXPECT_EQ(p.serve.engine.seed, 4294967295u);
}

// The same seed bound for the front ends without a command line (the
// Python module's LLM(seed=...), offline::LLM).
TEST(ServerCliRanges, EngineArgsRefuseASeedBeyondNumpysRange) {
  EngineArgs a;
  a.seed = 4294967296u;
  try {
    validate_engine_args(a);
    ADD_FAILURE() << "no error";
  } catch (const EngineArgError& e) {
    EXPECT_EQ(e.arg, "seed");
    EXPECT_NE(std::string(e.what()).find("seed must be in [0, 4294967295]"), std::string::npos)
        << e.what();
  }
  a.seed = 4294967295u;
  EXPECT_NO_THROW(validate_engine_args(a));
}

// vLLM's --max-logprobs (default 20) on serve and generate; values the
// samplers cannot give (above 20, or vLLM's -1: no cap) are refused naming
// the flag, as is LLM(max_logprobs=...) by the same check.
TEST(ServerCliRanges, MaxLogprobsIsWithinWhatTheSamplersCompute) {
  test::ParsedCli p;
  test::parse_cli({"serve"}, p);
  EXPECT_EQ(p.serve.engine.max_logprobs, 20);
  test::parse_cli({"serve", "--max-logprobs", "4"}, p);
  EXPECT_EQ(p.serve.engine.max_logprobs, 4);
  test::parse_cli({"generate", "--prompt", "x", "--max-logprobs", "0"}, p);
  EXPECT_EQ(p.gen.engine.max_logprobs, 0);
  for (const char* v : {"21", "-1"})
    EXPECT_EQ(parse_error({"serve", "--max-logprobs", v}),
              fmt::format("--max-logprobs: max_logprobs must be in [0, 20], got {} (vLLM's -1, "
                          "no cap, and values above 20 are not supported: the samplers compute "
                          "at most 20 top logprobs)",
                          v));
  EngineArgs a;
  a.max_logprobs = 40;
  EXPECT_THROW(validate_engine_args(a), EngineArgError);
}

}  // namespace
}  // namespace pagoda
