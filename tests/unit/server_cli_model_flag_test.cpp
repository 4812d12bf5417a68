// `pagoda serve --model DIR` (vLLM's flag) means the same as the positional
// MODEL_DIR; both with different values is a parse error.
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

TEST(ServerCli, ModelFlagEqualsPositional) {
  Parsed a;
  parse({"serve", "--model", "/models/qwen", "--port", "0"}, a);
  EXPECT_EQ(a.serve.engine.model_dir, "/models/qwen");

  Parsed b;
  parse({"serve", "--model=/models/qwen"}, b);
  EXPECT_EQ(b.serve.engine.model_dir, "/models/qwen");

  Parsed c;
  parse({"serve", "/models/qwen"}, c);
  EXPECT_EQ(c.serve.engine.model_dir, "/models/qwen");

  Parsed d;  // both, the same value: accepted
  parse({"serve", "/models/qwen", "--model", "/models/qwen"}, d);
  EXPECT_EQ(d.serve.engine.model_dir, "/models/qwen");

  Parsed e;
  parse({"generate", "--model", "/models/llama", "--prompt", "hi"}, e);
  EXPECT_EQ(e.gen.engine.model_dir, "/models/llama");
  EXPECT_TRUE(e.serve.engine.model_dir.empty());

  Parsed f;  // neither: empty (resolve_model_dir picks the bundled model)
  parse({"serve"}, f);
  EXPECT_TRUE(f.serve.engine.model_dir.empty());
}

TEST(ServerCli, PrefixCachingIsOnByDefaultAndTheVllmFlagsTurnIt) {
  Parsed a;
  parse({"serve"}, a);
  EXPECT_TRUE(a.serve.engine.enable_prefix_caching);
  Parsed b;
  parse({"serve", "--no-enable-prefix-caching"}, b);
  EXPECT_FALSE(b.serve.engine.enable_prefix_caching);
  Parsed c;
  parse({"generate", "--no-enable-prefix-caching", "--enable-prefix-caching", "--prompt", "hi"}, c);
  EXPECT_TRUE(c.gen.engine.enable_prefix_caching);  // the last one wins
}

TEST(ServerCli, ModelFlagConflictingWithPositionalIsAnError) {
  Parsed a;
  try {
    parse({"serve", "/models/a", "--model", "/models/b"}, a);
    FAIL() << "expected a CLI::ValidationError";
  } catch (const CLI::ValidationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--model"), std::string::npos) << what;
    EXPECT_NE(what.find("/models/a"), std::string::npos) << what;
    EXPECT_NE(what.find("/models/b"), std::string::npos) << what;
  }
}

TEST(ServerCli, ApplyModelFlag) {
  EngineArgs a;
  a.model = "m";
  apply_model_flag(a);
  EXPECT_EQ(a.model_dir, "m");
  EngineArgs b;
  b.model_dir = "x";
  b.model = "y";
  EXPECT_THROW(apply_model_flag(b), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda
