// The engine's global seed (EngineConfig::seed, vLLM's --seed): unseeded
// requests sample from it, so two engines with one seed give the same
// outputs for the same unseeded requests, and another seed other outputs;
// `--seed` on the command line reaches the engine (stories260K, CPU).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "server/engine_args.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

std::unique_ptr<Engine> make_engine(uint64_t seed) {
  return test::make_test_engine(test::stories_options(), seed);
}

// Three unseeded temperature-1 requests (one with n = 2); every choice's ids.
std::vector<std::vector<int32_t>> run(uint64_t seed) {
  auto engine = make_engine(seed);
  std::vector<std::shared_ptr<OutputChannel>> chs;
  for (int i = 0; i < 3; ++i) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = "r" + std::to_string(i);
    req->prompt_token_ids = {1, 403, static_cast<int32_t>(407 + i)};
    req->sampling.temperature = 1.0f;
    req->sampling.max_tokens = 24;
    req->sampling.ignore_eos = true;
    req->sampling.n = i == 1 ? 2 : 1;
    req->output = std::make_shared<OutputChannel>();
    chs.push_back(req->output);
    engine->add_request(std::move(req));
  }
  engine->run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (auto& ch : chs)
    for (const RequestOutput& c : collect_all(*ch)) {
      EXPECT_TRUE(c.error.empty()) << c.error;
      EXPECT_EQ(c.token_ids.size(), 24u);
      out.push_back(c.token_ids);
    }
  return out;
}

TEST(EngineSeed, SameSeedSameOutputsOtherSeedOtherOutputs) {
  const auto a = run(7), b = run(7), c = run(8);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], c[i]) << "choice " << i;
  // Each sequence draws its own stream: no two choices equal.
  EXPECT_NE(a[1], a[2]);
}

TEST(EngineSeed, SeedFlagReachesTheEngine) {
  CLI::App app;
  EngineArgs a;
  add_engine_flags(app, a);
  const char* argv[] = {"pagoda", "--seed", "1234", "--device", "cpu", "--max-model-len", "64"};
  app.parse(7, argv);
  a.model_dir = test::stories_dir();
  a.disable_log_stats = true;
  LoadedModel m = load_model(a, UsageContext::kLlmClass);
  EXPECT_EQ(m.engine->config().seed, 1234u);
}

}  // namespace
}  // namespace pagoda
