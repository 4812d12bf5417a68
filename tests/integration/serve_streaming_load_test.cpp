// Streaming under stress against the real `pagoda serve`:
//   - 50 streaming clients (SSE and WebSocket mixed) hang up after their
//     first delta: within 1 s /metrics (parsed strictly) shows no running or
//     waiting request and no used KV block, and the next request is served
//     exactly as before;
//   - a slow reader (1 byte/ms) beside 20 full-speed streams slows neither
//     them nor the engine.
//
// Measuring "not slowed" on a loaded 2-core CI machine: wall-clock times
// there swing by more than 10 % from run to run, so the primary measure
// counts engine steps (pagoda:engine_steps_total), not seconds: the 20
// streams need a fixed number of steps to be generated, and the steps the
// engine runs from their start until the last client has read its final
// chunk measure how late their deltas reach them, in units that CPU load
// does not change (the 21st request keeps the engine stepping the whole
// time in both runs); the 10 % bound applies to it (median of kRuns
// alternating runs on each side). The step *rate* (steps per wall-clock
// second, best of kRuns: load only lowers a rate) is compared with a loose
// bound, since it swings by +-40 % between identical runs here.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/integration/serve_test_util.h"
#include "tests/integration/ws_client.h"
#include "tests/support/prometheus_text.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;
using testing_prom::parse_prometheus_text;

testing_prom::Exposition scrape(uint16_t port) {
  HttpClient c(port);
  HttpResponse r = c.get("/metrics");
  EXPECT_EQ(r.status, 200);
  return parse_prometheus_text(r.body);
}

bool idle(const testing_prom::Exposition& ex) {
  return ex.value("pagoda:num_requests_running") == 0 && ex.value("pagoda:num_requests_waiting") == 0 &&
         ex.value("pagoda:kv_cache_used_blocks") == 0;
}

// Waits (bounded by 30 s) until /metrics shows the engine idle.
void wait_idle(uint16_t port) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!idle(scrape(port)) && std::chrono::steady_clock::now() < deadline) {
  }
}

class ServeStreamingLoad : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer({std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--network-threads", "2"});
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }
  static PagodaServer* server_;
};
PagodaServer* ServeStreamingLoad::server_ = nullptr;

json long_request() {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"temperature", 0}, {"ignore_eos", true}};
}

TEST_F(ServeStreamingLoad, FiftyClientsDroppingAfterTheirFirstDeltaFreeEverythingWithinOneSecond) {
  const uint16_t port = server_->port();
  wait_idle(port);
  const double aborted_before = scrape(port).value("pagoda:request_success_total", {{"finished_reason", "abort"}});
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&, i] {
      try {
        json body = long_request();
        if (i % 2 == 0) {  // SSE
          body["stream"] = true;
          HttpClient c(port);
          c.send(boost::beast::http::verb::post, "/v1/completions", body.dump());
          c.read_until("\"text\":");
          c.close();
        } else {  // WebSocket: half leave with a close frame, half just vanish
          WsClient ws(port);
          body["type"] = "completion";
          body["id"] = fmt::format("drop-{}", i);
          if (i % 4 == 3) body["resumable"] = false;
          ws.send(body);
          json m = ws.read();
          if (m["type"] != "delta") throw std::runtime_error("expected a delta, got " + m.dump());
          if (i % 4 == 1) ws.close(); else ws.drop();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
        failures++;
      }
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_EQ(failures.load(), 0);
  const auto dropped = std::chrono::steady_clock::now();
  testing_prom::Exposition ex;
  double waited_s = 0;
  // Idle and all 50 aborts accounted: the engine publishes its snapshot after
  // the step that pushed a delta, so a snapshot read right after the last
  // client's first delta may predate that request.
  auto settled = [&](const testing_prom::Exposition& e) {
    return idle(e) && e.value("pagoda:request_success_total", {{"finished_reason", "abort"}}) >= aborted_before + 50;
  };
  do {
    ex = scrape(port);
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - dropped).count();
  } while (!settled(ex) && waited_s < 1.0);
  EXPECT_TRUE(idle(ex)) << "after " << waited_s << " s: running " << ex.value("pagoda:num_requests_running")
                        << ", waiting " << ex.value("pagoda:num_requests_waiting") << ", used KV blocks "
                        << ex.value("pagoda:kv_cache_used_blocks");
  std::printf("[ metrics ] 50 dropped clients: idle and 0 used KV blocks %.3f s after the last hang-up\n", waited_s);
  EXPECT_EQ(ex.value("pagoda:request_success_total", {{"finished_reason", "abort"}}), aborted_before + 50);
  // A new request is served normally (and as before: greedy).
  json r = post_json(port, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
  json again = post_json(port, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 16);
  EXPECT_EQ(r["choices"][0]["text"], again["choices"][0]["text"]);
}

struct LoadRun {
  int64_t steps = 0;         // engine steps from the 20 streams' start to their last chunk read
  int64_t other_tokens = 0;  // tokens generated over that span for the 21st stream
  double rate = 0;           // engine steps per second over that span
};

// 20 full-speed SSE streams of kFast tokens while a 21st stream (480 tokens)
// is read at 1 byte/ms (slow) or at full speed (baseline). kFast leaves the
// 21st room to still be running when the 20 end even when a loaded machine
// spreads their arrival over many steps (404 steps for 250-token streams were
// seen with builds running beside the test, and the 21st had finished).
constexpr int kFast = 200;
LoadRun run_twenty(uint16_t port, bool slow) {
  HttpClient other(port);
  int rcvbuf = 4096;
  ::setsockopt(other.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  json body = long_request();
  body["stream"] = true;
  other.send(boost::beast::http::verb::post, "/v1/completions", body.dump());
  other.read_until("\"text\":");  // it runs
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    char buf[4096];
    boost::system::error_code ec;
    while (!stop.load() && !ec) {
      // Both readers wake once a millisecond (the client's pace, not a
      // sync), so the test process loads the CPU alike in both runs: the
      // slow one takes 1 byte a wake-up (~1 KB/s, far below the stream's
      // ~100 KB/s), the baseline all that has arrived (up to 4 KB, far
      // above it).
      other.socket().read_some(boost::asio::buffer(buf, slow ? 1 : sizeof buf), ec);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  // Connected first, and each request sent but for its last byte, so the 20
  // reach the server together: the span counted in engine steps is the
  // streams' own (kFast steps and their delivery), not how far apart 20
  // client threads got to send on a loaded machine.
  const json fast_body = {{"prompt", "The little dog"},
                          {"max_tokens", kFast},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"stream", true},
                          {"stream_options", {{"include_usage", true}}}};
  std::string wire;
  {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = fast_body.dump();
    req.keep_alive(true);
    req.prepare_payload();
    std::ostringstream os;
    os << req;
    wire = os.str();
  }
  std::vector<std::unique_ptr<HttpClient>> conns;
  for (int i = 0; i < 20; ++i) {
    conns.push_back(std::make_unique<HttpClient>(port));
    boost::asio::write(conns.back()->socket(), boost::asio::buffer(wire.data(), wire.size() - 1));
  }
  const testing_prom::Exposition e0 = scrape(port);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& c : conns) boost::asio::write(c->socket(), boost::asio::buffer(wire.data() + wire.size() - 1, 1));
  std::vector<StreamResult> results(20);
  std::vector<std::thread> fast;
  for (int i = 0; i < 20; ++i) fast.emplace_back([&, i] { results[i] = parse_stream(conns[i]->read_response()); });
  for (auto& t : fast) t.join();
  const auto t1 = std::chrono::steady_clock::now();
  const testing_prom::Exposition e1 = scrape(port);
  for (const StreamResult& r : results) {
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.usage["completion_tokens"], kFast);
  }
  // The 21st was still running (so the engine stepped the whole time).
  EXPECT_EQ(scrape(port).value("pagoda:num_requests_running"), 1);
  stop = true;
  other.close();  // unblocks the reader; the server aborts its request
  reader.join();
  LoadRun run;
  run.steps = static_cast<int64_t>(e1.value("pagoda:engine_steps_total") - e0.value("pagoda:engine_steps_total"));
  run.other_tokens = static_cast<int64_t>(e1.value("pagoda:generation_tokens_total") -
                                          e0.value("pagoda:generation_tokens_total")) -
                     20 * kFast;
  run.rate = static_cast<double>(run.steps) / std::chrono::duration<double>(t1 - t0).count();
  return run;
}

// Runs each way. A single run's count swings by +-20 % here (210-300 steps
// for one setting, idle machine): the span ends on the client's side, after
// the 20 client threads have been scheduled to read their last chunk, and
// the engine steps the lone 21st stream in well under a millisecond, so
// tens of milliseconds of thread scheduling are tens of steps.
constexpr int kRuns = 9;

TEST_F(ServeStreamingLoad, ASlowReaderSlowsNeitherTheOthersNorTheEngine) {
  const uint16_t port = server_->port();
  std::vector<int64_t> base_runs, slow_runs;
  double base_rate = 0, slow_rate = 0;
  for (int k = 0; k < kRuns; ++k) {
    for (bool slow : {false, true}) {
      wait_idle(port);
      LoadRun r = run_twenty(port, slow);
      std::printf("[ load    ] %s: %lld engine steps for the 20 streams, %lld tokens for the 21st, %.0f steps/s\n",
                  slow ? "slow reader" : "baseline   ", static_cast<long long>(r.steps),
                  static_cast<long long>(r.other_tokens), r.rate);
      // The 21st stream is decoded in every one of those steps, slow reader or
      // not: its consumer's pace throttles neither the engine nor that
      // sequence; its deltas wait in the connection's buffer. (The scheduler
      // decodes every running sequence in every step, beside any prefill.)
      EXPECT_EQ(r.other_tokens, r.steps) << (slow ? "slow reader" : "baseline");
      (slow ? slow_runs : base_runs).push_back(r.steps);
      (slow ? slow_rate : base_rate) = std::max(slow ? slow_rate : base_rate, r.rate);
    }
  }
  // kFast tokens each need >= kFast steps. The 20 are timed in engine steps (the
  // engine's clock, which a loaded machine stretches for both runs alike):
  // beside the slow reader they may need at most 10 % more. The medians of
  // kRuns runs each way are compared: the server's and the client threads'
  // scheduling on a loaded 2-core machine adds tens of steps to single runs
  // (CI saw baselines of 206-270 steps in one run, and medians of five of
  // 222 vs 292 in another, when the slow reader's thread woke on a 1 ms
  // timer and the baseline's on data), so the best of five compared one lucky run
  // with another. A reactor that waited for the slow socket would delay
  // every run's 20 requests, and their median with them.
  const auto median = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const int64_t base_steps = median(base_runs), slow_steps = median(slow_runs);
  EXPECT_GE(*std::min_element(base_runs.begin(), base_runs.end()), kFast);
  EXPECT_LE(static_cast<double>(slow_steps), 1.10 * static_cast<double>(base_steps) + 5)
      << "the 20 streams needed a median " << slow_steps << " engine steps beside a slow reader, "
      << base_steps << " without";
  // Wall-clock step rates swing by +-40 % between identical runs on this
  // shared 2-core machine, so the rate bound is loose: it catches an engine
  // that waits for the slow socket (its rate would collapse to the
  // reader's pace, ~7 steps/s of ~150-byte chunks at 1 byte/ms), not a few
  // percent.
  EXPECT_GE(slow_rate, 0.5 * base_rate) << "engine step rate " << slow_rate << "/s with a slow reader, "
                                        << base_rate << "/s without";
}

// Short limits: --ws-resume-grace 0.5 and --slow-reader-timeout 0.2.
class ServeStreamingLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer({std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--network-threads", "2",
                                "--ws-resume-grace", "0.5", "--slow-reader-timeout", "0.2"});
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }
  static double aborted(uint16_t port) {
    return scrape(port).value("pagoda:request_success_total", {{"finished_reason", "abort"}});
  }
  // Seconds until `cond` holds on /metrics (bounded by 20 s).
  template <typename Cond>
  static double seconds_until(uint16_t port, Cond cond) {
    auto t0 = std::chrono::steady_clock::now();
    double waited = 0;
    while (!cond(scrape(port)) && waited < 20.0)
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  static PagodaServer* server_;
};
PagodaServer* ServeStreamingLimits::server_ = nullptr;

TEST_F(ServeStreamingLimits, AnUnresumedStreamIsForgottenWhenItsGracePeriodEnds) {
  const uint16_t port = server_->port();
  wait_idle(port);
  std::chrono::steady_clock::time_point dropped;
  {
    WsClient ws(port);
    json m = long_request();
    m["type"] = "completion";
    m["id"] = "grace-1";
    ws.send(m);
    ws.read();
    ws.drop();
    dropped = std::chrono::steady_clock::now();
  }
  // Kept (detached) first, then forgotten once 0.5 s have passed: aborted
  // if it still ran, or dropped undelivered if it had finished.
  auto detached = [](const testing_prom::Exposition& ex) { return ex.value("pagoda:ws_streams_detached"); };
  double t1 = seconds_until(port, [&](const testing_prom::Exposition& ex) { return detached(ex) == 1; });
  EXPECT_LT(t1, 20.0) << "the dropped stream was never kept for a resume";
  seconds_until(port, [&](const testing_prom::Exposition& ex) {
    return detached(ex) == 0 && ex.value("pagoda:ws_streams") == 0;
  });
  double since_drop = std::chrono::duration<double>(std::chrono::steady_clock::now() - dropped).count();
  EXPECT_GE(since_drop, 0.5) << "forgotten before its grace period ended";
  EXPECT_LT(since_drop, 20.0) << "never forgotten";
  std::printf("[ grace   ] forgotten %.3f s after the drop (grace 0.5 s, sweeps every 0.2 s)\n", since_drop);
  wait_idle(port);  // aborted (or finished): nothing runs, no KV block held
  WsClient ws(port);
  ws.send({{"type", "resume"}, {"id", "grace-1"}, {"after", 0}});
  EXPECT_EQ(ws.read()["error"]["code"], 404);
}

TEST_F(ServeStreamingLimits, AReaderTooSlowForTooLongIsDroppedWithItsRequestsAborted) {
  const uint16_t port = server_->port();
  wait_idle(port);
  auto ex0 = scrape(port);
  const double aborted0 = ex0.value("pagoda:request_success_total", {{"finished_reason", "abort"}});
  const double length0 = ex0.value("pagoda:request_success_total", {{"finished_reason", "length"}});
  WsClient ws(port, /*rcvbuf=*/4096);
  const int n = 32;
  for (int i = 0; i < n; ++i) {
    json m = long_request();
    m["type"] = "completion";
    m["id"] = fmt::format("slow-{}", i);
    m["prompt"] = fmt::format("Once upon a time {}", i);
    ws.send(m);
  }
  // It does not read: once the kernel buffers are full (tens of KB; 32
  // streams of 480 tokens are ~1.4 MB of messages), a write stays pending
  // past 0.2 s and the server drops the connection. Wait (bounded) until
  // all 32 requests have ended, one way or the other.
  auto ended = [&](const testing_prom::Exposition& ex) {
    return ex.value("pagoda:request_success_total", {{"finished_reason", "abort"}}) - aborted0 +
               ex.value("pagoda:request_success_total", {{"finished_reason", "length"}}) - length0 ==
           n;
  };
  seconds_until(port, ended);
  auto ex1 = scrape(port);
  const double aborted = ex1.value("pagoda:request_success_total", {{"finished_reason", "abort"}}) - aborted0;
  const double finished = ex1.value("pagoda:request_success_total", {{"finished_reason", "length"}}) - length0;
  EXPECT_GE(aborted, 1) << "no request of the slow reader was aborted";
  EXPECT_EQ(aborted + finished, n);
  // The client finds its connection closed once it reads what was buffered.
  bool closed = false;
  try {
    for (int k = 0; k < 100000; ++k) ws.read(std::chrono::seconds(5));
  } catch (const std::exception& e) {
    closed = std::string(e.what()).find("timed out") == std::string::npos;
  }
  EXPECT_TRUE(closed) << "the server did not drop the slow reader";
  std::printf("[ slow    ] non-reading client dropped: %.0f of its %d requests aborted, %.0f had finished\n",
              aborted, n, finished);
  // Everyone else is fine.
  json r = post_json(port, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
}

}  // namespace
}  // namespace pagoda::testing_http
