// The real `pagoda serve` under concurrent load: 16 streams at once return
// exactly what each returns alone (continuous batching must not change a
// greedy result); the same with a KV cache too small for all of them at once
// (requests wait or are preempted, and still finish correctly); a client
// that hangs up mid-stream gets its request aborted.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <thread>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

const char* const kPrompts[16] = {
    "Once upon a time", "The little dog", "Lily and Tom", "One day, a cat", "The sun was", "Tim had a red",
    "In the park", "A big bird", "Sue wanted to", "The old tree", "Max was sad", "There was a boat",
    "Mom said", "The girl saw", "Ben liked to", "It was a cold"};

json request_body(int i) {
  // max_tokens 16 .. 181: the largest needs 12 blocks of 16 tokens.
  return {{"prompt", kPrompts[i]}, {"max_tokens", 16 + 11 * i}, {"temperature", 0}};
}

// Waits (bounded) until /metrics shows no running or waiting request; the
// engine publishes its snapshot right after the step that finished them.
std::string metrics_when_idle(uint16_t port) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string text;
  do {
    HttpClient c(port);
    text = c.get("/metrics").body;
    if (metric(text, "pagoda:num_requests_running") == 0 && metric(text, "pagoda:num_requests_waiting") == 0) break;
  } while (std::chrono::steady_clock::now() < deadline);
  return text;
}

std::vector<StreamResult> run_concurrently(uint16_t port) {
  std::vector<StreamResult> results(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] { results[i] = stream_request(port, "/v1/completions", request_body(i)); });
  for (auto& t : threads) t.join();
  return results;
}

class ServeConcurrency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer({std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--network-threads", "4"});
    // Each request alone, one after the other.
    alone_.resize(16);
    for (int i = 0; i < 16; ++i) alone_[i] = stream_request(server_->port(), "/v1/completions", request_body(i));
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }
  static PagodaServer* server_;
  static std::vector<StreamResult> alone_;
};
PagodaServer* ServeConcurrency::server_ = nullptr;
std::vector<StreamResult> ServeConcurrency::alone_;

TEST_F(ServeConcurrency, SixteenConcurrentStreamsEqualTheirSoloRuns) {
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(alone_[i].status, 200) << alone_[i].error_body;
    ASSERT_TRUE(alone_[i].done);
    EXPECT_FALSE(alone_[i].text.empty());
  }
  std::vector<StreamResult> together = run_concurrently(server_->port());
  for (int i = 0; i < 16; ++i) {
    SCOPED_TRACE(kPrompts[i]);
    EXPECT_EQ(together[i].status, 200) << together[i].error_body;
    EXPECT_TRUE(together[i].done);
    EXPECT_EQ(together[i].text, alone_[i].text);
    EXPECT_EQ(together[i].finish_reason, alone_[i].finish_reason);
  }
  std::string m = metrics_when_idle(server_->port());
  EXPECT_EQ(metric(m, "pagoda:num_requests_running"), 0) << m;
  EXPECT_EQ(metric(m, "pagoda:num_requests_waiting"), 0) << m;
  EXPECT_EQ(metric(m, "pagoda:kv_cache_usage_perc"), 0) << m;
  EXPECT_GT(metric(m, "pagoda:generation_tokens_total"), 0) << m;
  EXPECT_GT(metric(m, "pagoda:prompt_tokens_total"), 0) << m;
}

TEST_F(ServeConcurrency, TinyKvCacheStillCompletesAllSixteenCorrectly) {
  // 16 blocks of 16 tokens (= one max_model_len 256 sequence, the least the
  // executor accepts): the largest request (12 blocks) fits alone, all 16
  // together (~110 blocks at the end) do not.
  PagodaServer tiny({std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--num-gpu-blocks-override", "16",
                     "--max-model-len", "256"});
  std::vector<StreamResult> together = run_concurrently(tiny.port());
  for (int i = 0; i < 16; ++i) {
    SCOPED_TRACE(kPrompts[i]);
    EXPECT_EQ(together[i].status, 200) << together[i].error_body;
    EXPECT_TRUE(together[i].done);
    EXPECT_EQ(together[i].text, alone_[i].text);
  }
  std::string m = metrics_when_idle(tiny.port());
  EXPECT_EQ(metric(m, "pagoda:kv_cache_blocks_total"), 16) << m;
  EXPECT_EQ(metric(m, "pagoda:num_requests_running"), 0) << m;
  EXPECT_EQ(metric(m, "pagoda:kv_cache_usage_perc"), 0) << m;
  EXPECT_GE(metric(m, "pagoda:num_preemptions_total"), 0) << m;
  int status = tiny.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ServeConcurrency, ClientDisconnectMidStreamAbortsTheRequest) {
  const uint16_t port = server_->port();
  std::string before = metrics_when_idle(port);
  const double aborted_before = metric(before, "pagoda:request_success_total", "finished_reason=\"abort\"");
  const double tokens_before = metric(before, "pagoda:generation_tokens_total");
  const int max_tokens = 500;
  {
    HttpClient c(port);
    c.send(boost::beast::http::verb::post, "/v1/completions",
           json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"ignore_eos", true},
                {"temperature", 0}, {"stream", true}}
               .dump());
    c.read_until("\"text\":");  // the stream has started
    c.close();
  }
  // The engine publishes its snapshot after the step that pushed the first
  // delta, so a snapshot read right after the client saw that delta may
  // predate the request: wait (bounded) until the abort is accounted.
  std::string after;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    after = metrics_when_idle(port);
  } while (metric(after, "pagoda:request_success_total", "finished_reason=\"abort\"") < aborted_before + 1 &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(metric(after, "pagoda:num_requests_running"), 0) << after;
  EXPECT_EQ(metric(after, "pagoda:kv_cache_usage_perc"), 0) << after;
  const double generated = metric(after, "pagoda:generation_tokens_total") - tokens_before;
  // It was cut short and counted as aborted.
  EXPECT_LT(generated, max_tokens) << after;
  EXPECT_EQ(metric(after, "pagoda:request_success_total", "finished_reason=\"abort\""), aborted_before + 1) << after;
  // The server still serves.
  json r = post_json(port, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
}

}  // namespace
}  // namespace pagoda::testing_http
