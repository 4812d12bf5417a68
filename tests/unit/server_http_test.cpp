// The HTTP layer (HttpServer, HttpSession, Router) over real loopback
// sockets, against a scripted fake engine: keep-alive, streaming framing and
// coalescing, client disconnect → abort, size limits, 404/405. The real
// engine path is covered by tests/integration.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "engine/output_channel.h"
#include "server/http_server.h"
#include "tests/integration/http_client.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_http::HttpClient;
using testing_http::sse_payloads;

// Echoes the prompt back: one delta per prompt byte (byte tokenizer ids − 3),
// then a finished delta ("length"). max_tokens 50 means "hold": one delta,
// then wait for abort_request. max_tokens 40: push 5000 one-byte deltas at
// once (a burst faster than any reader).
class FakeEngine final : public EngineHandle {
 public:
  ~FakeEngine() override { stop(); }
  // Ends held requests and joins every request thread: their requests (and
  // the sessions' executors their output callbacks hold) are gone after
  // this, as the real engine's are before the server's io_context goes
  // (cli_serve.cpp's shutdown order).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  void add_request(std::unique_ptr<GenerateRequest> r) override {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back(
        [this, req = std::shared_ptr<GenerateRequest>(std::move(r))] { run(*req); });
  }
  void abort_request(const std::string& id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_.insert(id);
    }
    cv_.notify_all();
    abort_seen_.set_value_once(id);
  }
  EngineStats stats() const override {
    EngineStats s;
    s.num_running = running_.load();
    s.kv_blocks_total = 10;
    return s;
  }
  bool running() const override { return true; }

  struct OnceString {
    std::promise<std::string> p;
    std::once_flag once;
    void set_value_once(const std::string& v) {
      std::call_once(once, [&] { p.set_value(v); });
    }
  } abort_seen_;
  std::future<std::string> abort_future() { return abort_seen_.p.get_future(); }
  OnceString held_;  // set when a "hold" request has sent its first delta
  std::future<std::string> held_future() { return held_.p.get_future(); }

 private:
  void run(GenerateRequest& req) {
    running_++;
    RequestOutput d;
    d.request_id = req.request_id;
    d.prompt_tokens = static_cast<int64_t>(req.prompt_token_ids.size());
    int64_t n = 0;
    auto push_text = [&](std::string t) {
      RequestOutput x = d;
      x.text = std::move(t);
      x.completion_tokens = ++n;
      req.output->push(std::move(x));
    };
    if (req.sampling.max_tokens == 50) {
      push_text("first");
      held_.set_value_once(req.request_id);
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || aborted_.count(req.request_id); });
      running_--;
      RequestOutput end = d;
      end.finished = true;
      end.finish_reason = FinishReason::kAbort;
      req.output->push(std::move(end));
      return;
    }
    if (req.sampling.max_tokens == 40) {
      for (int i = 0; i < 5000; ++i) push_text(std::string(1, static_cast<char>('a' + i % 26)));
    } else {
      for (int32_t id : req.prompt_token_ids)
        if (id >= 3) push_text(std::string(1, static_cast<char>(id - 3)));
    }
    RequestOutput end = d;
    end.finished = true;
    end.finish_reason = FinishReason::kLength;
    end.completion_tokens = n;
    running_--;
    req.output->push(std::move(end));
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::set<std::string> aborted_;
  std::vector<std::thread> threads_;
  std::atomic<int> running_{0};
};

class ServerHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.model = testing_protocol::make_test_model();
    ctx_.model.max_model_len = 100000;
    ctx_.engine = &engine_;
    ctx_.limits.max_body_bytes = 4096;
    server_ = std::make_unique<HttpServer>(ctx_, "127.0.0.1", 0, 2);
    server_->start();
  }
  void TearDown() override {
    engine_.stop();  // before the server's io_context goes (a request thread may still hold its
                     // executor)
    server_->stop();
    server_->join();
    server_.reset();
  }
  uint16_t port() const { return server_->port(); }

  FakeEngine engine_;
  ServerContext ctx_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ServerHttpTest, NonStreamedCompletionsKeepAlive) {
  HttpClient c(port());
  for (const char* prompt : {"hello", "second request, same connection"}) {
    auto r = c.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 60}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_TRUE(r.keep_alive);
    json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], prompt);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], std::string(prompt).size());
    EXPECT_EQ(j["usage"]["prompt_tokens"], std::string(prompt).size() + 1);
  }
  auto models = c.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "tiny");
}

TEST_F(ServerHttpTest, StreamedChatIsChunkedSse) {
  HttpClient c(port());
  auto r =
      c.post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hey"}}}},
                                          {"max_tokens", 60},
                                          {"stream", true},
                                          {"stream_options", {{"include_usage", true}}}}
                                         .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.transfer_encoding, "chunked");
  auto events = sse_payloads(r.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 1; i + 2 < events.size(); ++i) {
    json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"][0]["delta"].contains("content"))
      text += e["choices"][0]["delta"]["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "<s>[user]hey[assistant]");
  EXPECT_EQ(finish, "length");
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], text.size());
  // The connection is still usable.
  EXPECT_EQ(c.get("/health").status, 200);
}

TEST_F(ServerHttpTest, BurstOfDeltasCoalescesAndArrivesWhole) {
  HttpClient c(port());
  auto r =
      c.post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 40}, {"stream", true}}.dump());
  ASSERT_EQ(r.status, 200);
  auto events = sse_payloads(r.body);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  ASSERT_EQ(text.size(), 5000u);
  for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ(text[i], 'a' + i % 26) << i;
  // 5000 deltas pushed far faster than one write completes: they go out in
  // far fewer chunks.
  EXPECT_LT(events.size(), 5000u);
}

TEST_F(ServerHttpTest, ClientDisconnectMidStreamAbortsTheRequest) {
  auto aborted = engine_.abort_future();
  auto held = engine_.held_future();  // the engine's id of the request
  std::string request_id;
  {
    HttpClient c(port());
    c.send(boost::beast::http::verb::post, "/v1/completions",
           json{{"prompt", "x"}, {"max_tokens", 50}, {"stream", true}}.dump());
    std::string got = c.read_until("first");
    size_t at = got.find("\"id\":\"");
    ASSERT_NE(at, std::string::npos);
    request_id = got.substr(at + 6, 5 + 32);
    c.close();
  }
  ASSERT_EQ(aborted.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_EQ(held.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  // The abort names the engine's request: the response's id with the
  // process-unique suffix (GenerationGroup).
  const std::string engine_id = held.get();
  EXPECT_EQ(aborted.get(), engine_id);
  EXPECT_EQ(engine_id.rfind(request_id + "#", 0), 0u) << engine_id;
  HttpClient c2(port());
  EXPECT_EQ(c2.post("/v1/completions", R"({"prompt": "ok", "max_tokens": 5})").status, 200);
}

TEST_F(ServerHttpTest, ClientDisconnectWhileWaitingForNonStreamedAborts) {
  auto aborted = engine_.abort_future();
  auto held = engine_.held_future();
  {
    HttpClient c(port());
    c.send(boost::beast::http::verb::post, "/v1/completions",
           R"({"prompt": "x", "max_tokens": 50})");
    ASSERT_EQ(held.wait_for(std::chrono::seconds(30)), std::future_status::ready);  // it runs
    c.close();
  }
  ASSERT_EQ(aborted.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(aborted.get().rfind("cmpl-", 0), 0u);
}

TEST_F(ServerHttpTest, RoutingErrorsAreOpenAIErrors) {
  HttpClient c(port());
  auto nf = c.get("/v1/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(json::parse(nf.body)["error"]["type"], "NotFoundError");
  // A raw non-UTF-8 byte in the path (curl would percent-encode it) once
  // crashed the server while the 404 echoed it; now it becomes U+FFFD and
  // the same connection goes on serving.
  auto raw = c.get("/v1/\xff");
  EXPECT_EQ(raw.status, 404);
  EXPECT_NE(json::parse(raw.body)["error"]["message"].get<std::string>().find("\xEF\xBF\xBD"),
            std::string::npos)
      << raw.body;
  auto na = c.get("/v1/completions");
  EXPECT_EQ(na.status, 405);
  EXPECT_EQ(na.allow, "POST");
  EXPECT_EQ(json::parse(na.body)["error"]["code"], 405);
  auto bad = c.post("/v1/completions", "{not json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["type"], "BadRequestError");
  auto unknown = c.post("/v1/completions", R"({"prompt": "x", "model": "nope"})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(json::parse(unknown.body)["error"]["message"], "The model `nope` does not exist.");
  auto metrics = c.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("pagoda:num_requests_running{model_name=\"tiny\"} 0\n"),
            std::string::npos)
      << metrics.body;
  auto version = c.get("/version");
  EXPECT_EQ(json::parse(version.body)["version"], PAGODA_VERSION);
}

// vLLM's validate_json_request: a POST endpoint takes application/json only
// (parameters allowed, case-insensitive); anything else, or no
// Content-Type, is a 400 before the body is read. A browser page posts
// text/plain or a form cross-site without a CORS preflight: it gets no
// further than this.
TEST_F(ServerHttpTest, PostBodiesMustBeApplicationJson) {
  namespace http = boost::beast::http;
  HttpClient c(port());
  const std::string body = json{{"prompt", "hi"}, {"max_tokens", 60}}.dump();
  const auto post = [&](const std::string& path, const std::string& type, const std::string& b) {
    c.send(http::verb::post, path, b, {{"Content-Type", type}});
    return c.read_response();
  };
  for (const std::string type :
       {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x", "application/jsonx", "application/json-seq", ""}) {
    SCOPED_TRACE("Content-Type: " + type);
    auto r = post("/v1/completions", type, body);
    EXPECT_EQ(r.status, 400) << r.body;
    json e = json::parse(r.body);
    EXPECT_EQ(e["error"]["message"], "Unsupported Media Type: Only 'application/json' is allowed");
    EXPECT_EQ(e["error"]["type"], "BadRequestError");
    EXPECT_EQ(e["error"]["code"], 400);
  }
  for (const char* path : {"/v1/chat/completions", "/tokenize", "/detokenize", "/generate"})
    EXPECT_EQ(post(path, "text/plain", "{}").status, 400) << path;
  for (const std::string type : {"application/json", "application/json; charset=utf-8",
                                 "Application/JSON", "application/json ;charset=utf-8"}) {
    auto r = post("/v1/completions", type, body);
    EXPECT_EQ(r.status, 200) << type << ": " << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "hi") << type;
  }
  // Routing errors come first; GETs need no Content-Type.
  EXPECT_EQ(post("/v1/nothing", "text/plain", "{}").status, 404);
  EXPECT_EQ(post("/metrics", "text/plain", "").status, 405);
  EXPECT_EQ(c.get("/v1/models").status, 200);
}

// vLLM's check_cache_salt_support: a cache_salt, when given, must be a
// non-empty string.
TEST_F(ServerHttpTest, EmptyCacheSaltIs400NamingTheField) {
  HttpClient c(port());
  const json bodies[] = {{{"prompt", "hi"}, {"max_tokens", 60}, {"cache_salt", ""}},
                         {{"messages", {{{"role", "user"}, {"content", "hey"}}}},
                          {"max_tokens", 60},
                          {"cache_salt", ""}}};
  const char* paths[] = {"/v1/completions", "/v1/chat/completions"};
  for (int i = 0; i < 2; ++i) {
    auto r = c.post(paths[i], bodies[i].dump());
    EXPECT_EQ(r.status, 400) << paths[i] << ": " << r.body;
    json e = json::parse(r.body);
    EXPECT_EQ(e["error"]["type"], "BadRequestError");
    EXPECT_EQ(e["error"]["code"], 400);
    EXPECT_EQ(e["error"]["param"], "cache_salt");
    EXPECT_EQ(e["error"]["message"],
              "Parameter 'cache_salt' must be a non-empty string if provided.");
  }
  json ok = bodies[0];
  ok["cache_salt"] = "s";
  EXPECT_EQ(c.post("/v1/completions", ok.dump()).status, 200);
  ok["cache_salt"] = nullptr;  // None: unsalted
  EXPECT_EQ(c.post("/v1/completions", ok.dump()).status, 200);
}

TEST_F(ServerHttpTest, OversizedBodyIs413AndServerGoesOn) {
  HttpClient c(port());
  auto r = c.post("/v1/completions", json{{"prompt", std::string(10000, 'a')}}.dump());
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("too large"),
            std::string::npos);
  HttpClient c2(port());
  EXPECT_EQ(c2.get("/health").status, 200);
}

// A request Beast cannot parse gets a 400 that says it is malformed HTTP,
// Beast's own words after the colon, then the connection closes; the
// server goes on.
TEST_F(ServerHttpTest, MalformedRequestIsA400NamingIt) {
  struct Case {
    std::string bytes, message;
  };
  const Case cases[] = {
      {"GET /health HTTX/1.1\r\nHost: x\r\n\r\n", "Malformed HTTP request: bad version"},
      {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
       "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
       "Malformed HTTP request: bad chunk"},
  };
  for (const Case& c : cases) {
    HttpClient client(port());
    boost::asio::write(client.socket(), boost::asio::buffer(c.bytes));
    const std::string response = client.read_until(c.message);
    EXPECT_EQ(response.rfind("HTTP/1.1 400 ", 0), 0u) << response;
  }
  HttpClient after(port());
  EXPECT_EQ(after.get("/health").status, 200);
}

// "Expect: 100-continue" (curl sends it for bodies over 1 MiB and waits a
// second for the interim response): the server answers 100 Continue after
// the header, then the final response after the body; a body whose declared
// length is over the limit gets its 413 at once, without the 100.
TEST_F(ServerHttpTest, ExpectContinueGetsAnInterim100ThenTheResponse) {
  HttpClient c(port());
  const std::string body = json{{"prompt", "hi"}, {"max_tokens", 5}}.dump();
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  boost::asio::write(c.socket(), boost::asio::buffer(head));
  const std::string interim = c.read_until("\r\n\r\n");
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  boost::asio::write(c.socket(), boost::asio::buffer(body));
  const std::string final_response = c.read_until("\"finish_reason\"");
  EXPECT_EQ(final_response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << final_response;
  EXPECT_NE(final_response.find("\"text\":\"hi\""), std::string::npos) << final_response;

  HttpClient big(port());
  const std::string big_head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: 100000\r\n\r\n";
  boost::asio::write(big.socket(), boost::asio::buffer(big_head));
  const std::string refused = big.read_until("too large");
  EXPECT_EQ(refused.rfind("HTTP/1.1 413 ", 0), 0u) << refused;
}

}  // namespace
}  // namespace pagoda
