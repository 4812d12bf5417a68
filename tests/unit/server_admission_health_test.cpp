// The waiting-queue bound (--max-num-waiting-requests) and /health
// (issue 12): admission reserves places on one atomic counter, so threads
// racing for the last places never overshoot; a full queue answers 503 with
// Retry-After and OpenAI's error JSON before any stream starts; /health is
// 503 while the queue is full and while the engine has work but a step
// does not complete (a wedged executor, released by the test).
#include <gtest/gtest.h>

#include <future>
#include <latch>
#include <thread>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "engine_test_fakes.h"
#include "server/engine_handle.h"
#include "server/http_server.h"
#include "server/router.h"
#include "server/ws_stream.h"
#include "tests/integration/http_client.h"
#include "tests/integration/ws_client.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_http::HttpClient;

std::unique_ptr<GenerateRequest> req(const std::string& id) {
  auto r = std::make_unique<GenerateRequest>();
  r->request_id = id;
  r->prompt_token_ids = {1, 5, 6};
  r->sampling.temperature = 0.0f;
  r->sampling.max_tokens = 2;
  r->output = std::make_shared<OutputChannel>();
  return r;
}

EngineConfig bounded(int64_t limit) {
  EngineConfig cfg;
  cfg.log_stats = false;
  cfg.max_num_seqs = 4;
  cfg.max_num_waiting_requests = limit;
  return cfg;
}

TEST(EngineAdmission, ThreadsRacingForTheLastPlacesNeverOvershootTheBound) {
  Engine engine(
      bounded(50), std::make_unique<testing::FakeExecutor>(40, 64, 4),
      std::make_shared<testing::FakeTokenizer>(40));  // not started: nothing leaves the queue
  constexpr int kThreads = 8, kEach = 20;
  std::atomic<int> accepted{0}, full{0};
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        std::vector<std::unique_ptr<GenerateRequest>> one;
        one.push_back(req(std::to_string(t) + std::string("-").append(std::to_string(i))));
        Admission a = engine.try_add_requests(one);
        (a == Admission::kAccepted ? accepted : full)++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 50);
  EXPECT_EQ(full.load(), kThreads * kEach - 50);
  EXPECT_EQ(engine.heartbeat().num_waiting, 50);

  std::vector<std::unique_ptr<GenerateRequest>> too_many;
  for (int i = 0; i < 51; ++i)
    too_many.push_back(req(std::string("big").append(std::to_string(i))));
  EXPECT_EQ(engine.try_add_requests(too_many), Admission::kTooLarge);
  ASSERT_NE(too_many[0], nullptr);  // refused: left with the caller

  // One step schedules max_num_seqs of them: their places are free again.
  engine.step();
  EXPECT_EQ(engine.heartbeat().num_waiting, 46);
  std::vector<std::unique_ptr<GenerateRequest>> four;
  for (int i = 0; i < 4; ++i) four.push_back(req(std::string("later").append(std::to_string(i))));
  EXPECT_EQ(engine.try_add_requests(four), Admission::kAccepted);
  std::vector<std::unique_ptr<GenerateRequest>> one;
  one.push_back(req("one-more"));
  EXPECT_EQ(engine.try_add_requests(one), Admission::kQueueFull);
  engine.run_until_idle();
  EXPECT_EQ(engine.heartbeat().num_waiting, 0);
}

TEST(EngineAdmission, FullQueueAnswers503WithRetryAfterBeforeAnyStreamAndHealthSaysOverloaded) {
  auto model = testing_protocol::make_test_model();
  Engine engine(bounded(1), std::make_unique<testing::FakeExecutor>(259, 64, 4), model.tokenizer);
  EngineAdapter handle(engine);
  handle.set_running(true);
  StreamHub streams(std::chrono::milliseconds(0));  // /v1/ws
  ServerContext ctx;
  ctx.model = model;
  ctx.engine = &handle;
  ctx.streams = &streams;
  HttpServer server(ctx, "127.0.0.1", 0, 2);
  server.start();

  // The engine is not started yet: the first request waits in its queue.
  HttpClient first(server.port());
  first.send(boost::beast::http::verb::post, "/v1/completions",
             json{{"prompt", "hi"}, {"max_tokens", 3}}.dump());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine.heartbeat().num_waiting < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_EQ(engine.heartbeat().num_waiting, 1);

  HttpClient c(server.port());
  for (bool stream : {false, true}) {
    auto r = c.post("/v1/completions",
                    json{{"prompt", "hi"}, {"max_tokens", 3}, {"stream", stream}}.dump());
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.retry_after, "1");
    EXPECT_EQ(r.content_type, "application/json");
    json e = json::parse(r.body);
    EXPECT_EQ(e["error"]["type"], "ServiceUnavailableError");
    EXPECT_EQ(e["error"]["code"], 503);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("--max-num-waiting-requests 1"),
              std::string::npos)
        << r.body;
  }
  // Two prompts can never fit a queue of one: 400 naming the field.
  auto big = c.post("/v1/completions", json{{"prompt", {"a", "b"}}, {"max_tokens", 3}}.dump());
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_EQ(json::parse(big.body)["error"]["param"], "prompt");

  auto h = c.get("/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_NE(h.body.find("overloaded"), std::string::npos) << h.body;

  // /v1/ws: an error message with code 503; nothing is queued, the id is free.
  testing_http::WsClient ws(server.port());
  ws.send(json{{"type", "completion"}, {"id", "w"}, {"prompt", "hi"}, {"max_tokens", 3}});
  json m = ws.read();
  EXPECT_EQ(m["type"], "error") << m.dump();
  EXPECT_EQ(m["id"], "w");
  EXPECT_EQ(m["error"]["code"], 503) << m.dump();
  EXPECT_EQ(engine.heartbeat().num_waiting, 1);

  engine.start();  // the queued request runs; the queue empties
  auto done = first.read_response();
  EXPECT_EQ(done.status, 200) << done.body;
  int health = 0;
  while (health != 200 && std::chrono::steady_clock::now() < deadline)
    health = c.get("/health").status;
  EXPECT_EQ(health, 200);
  // The refused WebSocket id can be used again.
  ws.send(json{{"type", "completion"}, {"id", "w"}, {"prompt", "hi"}, {"max_tokens", 3}});
  do {
    m = ws.read();
  } while (m["type"] == "delta");
  EXPECT_EQ(m["type"], "done") << m.dump();
  server.stop();
  server.join();
}

// A FakeExecutor whose next execute() blocks until released.
class WedgingExecutor : public testing::FakeExecutor {
 public:
  using FakeExecutor::FakeExecutor;
  std::promise<void> entered;
  std::promise<void> release;
  void execute(const ForwardBatch& b, std::vector<float>& logits) override {
    if (!wedged_once_) {
      wedged_once_ = true;
      entered.set_value();
      release.get_future().wait();
    }
    FakeExecutor::execute(b, logits);
  }

 private:
  bool wedged_once_ = false;
};

TEST(EngineHealth, WedgedStepMakesHealth503UntilItCompletes) {
  auto exec = std::make_unique<WedgingExecutor>(40, 64, 4);
  WedgingExecutor* wedge = exec.get();
  EngineConfig cfg;
  cfg.log_stats = false;
  Engine engine(cfg, std::move(exec), std::make_shared<testing::FakeTokenizer>(40));
  EngineAdapter handle(engine, std::chrono::milliseconds(200));
  ServerContext ctx;
  ctx.model = testing_protocol::make_test_model();
  ctx.engine = &handle;
  Router router(ctx);
  auto health = [&] { return router.route(boost::beast::http::verb::get, "/health", "", ""); };

  EXPECT_EQ(health().status, 503);  // not running yet
  engine.start();
  handle.set_running(true);
  EXPECT_EQ(health().status, 200);  // idle: no work, however long ago the last step

  auto r = req("wedged");
  auto ch = r->output;
  handle.add_request(std::move(r));
  wedge->entered.get_future().wait();  // the step is now stuck in the executor
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  RouteResult h = health();
  while (h.status == 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    h = health();
  }
  EXPECT_EQ(h.status, 503);
  const json e = json::parse(h.body);
  EXPECT_EQ(e["error"]["type"], "ServiceUnavailableError");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("has not completed a step"),
            std::string::npos)
      << h.body;

  wedge->release.set_value();
  RequestOutput out = collect(*ch);
  EXPECT_EQ(out.token_ids.size(), 2u);
  while (health().status != 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(health().status, 200);
  handle.set_running(false);
  engine.stop();
}

}  // namespace
}  // namespace pagoda
