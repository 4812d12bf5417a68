// A repeated option keeps its last value in `pagoda serve` and `pagoda
// generate`, as vLLM's argparse does (CLI11's default was an error: "At
// Most 1 required but received 2"); options that are lists still collect.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "server/cli.h"
#include "tests/unit/server_cli_test_helpers.h"

namespace pagoda {
namespace {

using Parsed = test::ParsedCli;
const auto parse = test::parse_cli;

TEST(ServerCliRepeated, ServeScalarOptionsKeepTheLastValue) {
  Parsed p;
  parse({"serve",          "--port",  "8001",           "--port",  "8002",
         "--max-num-seqs", "4",       "--max-num-seqs", "8",       "--host",
         "0.0.0.0",        "--host",  "127.0.0.1",      "--seed",  "1",
         "--seed",         "2",       "--dtype",        "float16", "--dtype",
         "float32",        "--model", "/m/a",           "--model", "/m/b"},
        p);
  EXPECT_EQ(p.serve.port, 8002);
  EXPECT_EQ(p.serve.engine.max_num_seqs, 8);
  EXPECT_EQ(p.serve.host, "127.0.0.1");
  EXPECT_EQ(p.serve.engine.seed, 2u);
  EXPECT_EQ(p.serve.engine.dtype, "float32");
  EXPECT_EQ(p.serve.engine.model_dir, "/m/b");
}

TEST(ServerCliRepeated, GenerateScalarOptionsKeepTheLastValue) {
  Parsed p;
  parse({"generate", "--prompt", "a", "--temperature", "0.5", "--temperature", "0", "--max-tokens",
         "3", "--max-tokens", "5", "--output-format", "text", "--output-format", "json",
         "--sampling-params", "{\"n\": 2}", "--sampling-params", "{}"},
        p);
  EXPECT_EQ(p.gen.temperature, 0.0);
  EXPECT_EQ(p.gen.max_tokens, 5);
  EXPECT_EQ(p.gen.output_format, "json");
  EXPECT_EQ(p.gen.sampling_params, "{}");
}

TEST(ServerCliRepeated, ListOptionsStillCollectEveryValue) {
  Parsed p;
  parse({"generate", "--prompt", "a", "--prompt", "b", "--stop", "x", "--stop", "y",
         "--stop-token-ids", "2", "--stop-token-ids", "3"},
        p);
  EXPECT_EQ(p.gen.prompts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.gen.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(p.gen.stop_token_ids, (std::vector<int64_t>{2, 3}));
  Parsed q;
  parse({"serve", "--allowed-origins", "http://a", "--allowed-origins", "http://b"}, q);
  EXPECT_EQ(q.serve.allowed_origins.size(), 2u);
}

}  // namespace
}  // namespace pagoda
