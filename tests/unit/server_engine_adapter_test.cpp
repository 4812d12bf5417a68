// EngineAdapter (server/engine_handle.h): while not running (before start,
// and from the moment shutdown begins) a request is answered at once with a
// 503 "The server is shutting down" instead of sitting in a stopped engine's
// queue; while running it reaches the engine.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "engine_test_fakes.h"
#include "server/engine_handle.h"
#include "server/openai_response.h"

namespace pagoda {
namespace {

std::shared_ptr<OutputChannel> add(EngineHandle& h, const std::string& id) {
  auto req = std::make_unique<GenerateRequest>();
  req->request_id = id;
  req->prompt_token_ids = {1, 5, 6};
  req->sampling.temperature = 0.0f;
  req->sampling.max_tokens = 2;
  req->output = std::make_shared<OutputChannel>();
  auto ch = req->output;
  h.add_request(std::move(req));
  return ch;
}

TEST(EngineAdapter, RequestsWhileNotRunningGet503AndRunningOnesReachTheEngine) {
  EngineConfig cfg;
  cfg.log_stats = false;
  Engine engine(cfg, std::make_unique<testing::FakeExecutor>(40, 16, 4),
                std::make_shared<testing::FakeTokenizer>(40));
  EngineAdapter handle(engine);

  RequestOutput refused = collect(*add(handle, "early"));  // answered without the engine
  EXPECT_TRUE(refused.finished);
  EXPECT_EQ(refused.error_status, 503);
  EXPECT_EQ(refused.prompt_tokens, 3);
  const OpenAIError e = error_for_output(refused);
  EXPECT_EQ(e.status, 503);
  EXPECT_NE(e.body().find("ServiceUnavailableError"), std::string::npos) << e.body();
  EXPECT_NE(e.body().find("The server is shutting down"), std::string::npos) << e.body();

  handle.set_running(true);
  auto ch = add(handle, "served");
  engine.run_until_idle();
  RequestOutput served = collect(*ch);
  EXPECT_EQ(served.error, "");
  EXPECT_EQ(served.token_ids.size(), 2u);

  handle.set_running(false);
  EXPECT_EQ(collect(*add(handle, "late")).error_status, 503);
  EXPECT_EQ(engine.stats().num_waiting, 0);  // nothing was queued
}

}  // namespace
}  // namespace pagoda
