// Issue 12, "every input bounded before it costs", on the real `pagoda
// serve`: a 30 MB prompt is refused before it is tokenized (fast, no
// memory), prompts x n and messages per chat are capped before any work,
// /tokenize counts prompts past max_model_len as vLLM does, and
// preprocessing runs on its own pool: /health answers while a big request
// is being tokenized, a full queue is a 503 with Retry-After, and a client
// that leaves mid-preprocessing leaves nothing in the engine. The order of
// events is forced through the pool's own gauges in /metrics
// (pagoda:preprocess_running, pagoda:preprocess_dropped_total), never by
// sleeping.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "tests/integration/serve_test_util.h"
#include "tests/integration/ws_client.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// VmRSS / VmHWM of a process in bytes (/proc/<pid>/status, kB).
size_t proc_status_bytes(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  ADD_FAILURE() << "no " << key << " for pid " << pid;
  return 0;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double metric_now(uint16_t port, const std::string& name) {
  HttpClient c(port);
  return metric(c.get("/metrics").body, name);
}

// Polls /metrics until done(value of name) (60 s at most; a failure, not a hang).
template <class Done>
bool wait_metric(uint16_t port, const std::string& name, Done done) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (done(metric_now(port, name))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}
bool wait_metric_at_least(uint16_t port, const std::string& name, double value) {
  return wait_metric(port, name, [value](double v) { return v >= value; });
}

// A completions body whose preprocessing takes seconds: `count` prompts of
// ~300 tokens each, every one tokenized before max_tokens is checked
// against each (1: a valid generation; 600: a 400 once all are tokenized).
std::string slow_body(int count, int max_tokens) {
  std::string one;
  while (one.size() < 1400)
    one += "Once upon a time, there was a little girl named Lily. She liked to play. ";
  json prompts = json::array();
  for (int i = 0; i < count; ++i) prompts.push_back(one);
  return json{{"prompt", prompts}, {"max_tokens", max_tokens}}.dump();
}

constexpr int kSlowPrompts = 3000;  // ~4.5 MB body: seconds of tokenization

class ServeBoundedInput : public BundledServerSuite<ServeBoundedInput> {
 public:
  static std::vector<std::string> server_args() {
    return {std::string(PAGODA_SOURCE_DIR) + "/models/stories260K",
            "--network-threads",
            "1",
            "--preprocess-threads",
            "1",
            "--max-preprocess-queue",
            "1",
            "--max-seqs-per-request",
            std::to_string(kSlowPrompts)};
  }
};

// A 30 MiB prompt (31,457,280 bytes of text).
std::string thirty_megabyte_prompt() {
  std::string prompt;
  prompt.reserve(30u << 20);
  while (prompt.size() < (30u << 20)) prompt += "Once upon a time there was a little girl. ";
  prompt.resize(30u << 20);
  return prompt;
}

// The server's memory before a big request, and the checks after it. The
// peak (VmHWM) is reset first ("5" to /proc/<pid>/clear_refs, Linux 4.0+),
// so it is this request's peak, measured from the RSS now.
class MemoryWatch {
 public:
  explicit MemoryWatch(pid_t pid) : pid_(pid) {
    std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
    rss_before_ = proc_status_bytes(pid, "VmRSS");
    hwm_before_ = std::max(rss_before_, proc_status_bytes(pid, "VmHWM"));
  }

  // Issue 12's acceptance: RSS growth under 100 MB, at its peak too. The
  // peak is the body and the one parsed copy of the prompt (~63 MB; was
  // ~125 MB with nlohmann's lexer buffers and its DOM builder's copy, 5 GB
  // when the prompt was tokenized).
  void expect_growth_under_100mb() const { expect_growth_under(100u << 20); }
  void expect_growth_under(size_t limit) const {
    const size_t rss_after = proc_status_bytes(pid_, "VmRSS");
    const size_t hwm_after = proc_status_bytes(pid_, "VmHWM");
#ifdef PAGODA_SANITIZE
    // ASan keeps freed memory in its quarantine (and adds redzones): RSS
    // says nothing about the server's own use there; the Release run
    // checks it.
    (void)rss_after;
    (void)hwm_after;
    (void)limit;
#else
    EXPECT_LT(rss_after, rss_before_ + limit) << rss_before_ << " -> " << rss_after;
    EXPECT_LT(hwm_after, hwm_before_ + limit) << hwm_before_ << " -> " << hwm_after;
#endif
    std::printf("server RSS %.1f -> %.1f MB, peak %.1f -> %.1f MB\n", rss_before_ / 1048576.0,
                rss_after / 1048576.0, hwm_before_ / 1048576.0, hwm_after / 1048576.0);
  }

 private:
  pid_t pid_;
  size_t rss_before_ = 0;
  size_t hwm_before_ = 0;
};

TEST_F(ServeBoundedInput, ThirtyMegabytePromptIsRefusedBeforeTokenizing) {
  const std::string body = json{{"prompt", thirty_megabyte_prompt()}, {"max_tokens", 1}}.dump();
  const MemoryWatch memory(server_->pid());
  HttpClient c(port());
  c.send(boost::beast::http::verb::post, "/v1/completions", body);
  const auto sent = Clock::now();  // the body is with the server (socket buffers aside)
  HttpResponse r = c.read_response();
  const double took = seconds_since(sent);
  ASSERT_EQ(r.status, 400) << r.body.substr(0, 300);
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_EQ(e["code"], 400);
  EXPECT_NE(e["message"].get<std::string>().find(
                "This model's maximum context length is 512 tokens. However, your "
                "request has at least "),
            std::string::npos)
      << e.dump();
  // Without the bound: 45 s and 5 GB. With it: reading the body and one
  // pass over its bytes (0.1-0.4 s on a loaded 2-core machine, see
  // docs/PERFORMANCE.md); the margin covers a loaded CI machine and ASan.
  EXPECT_LT(took, 10.0);
  std::printf("400 after %.3f s\n", took);
  memory.expect_growth_under_100mb();
}

// With truncate_prompt_tokens the same prompt is valid (vLLM keeps its last
// k tokens); only its tail is tokenized (encode_prompt_tail; exactness is
// prompt_tail_test's), so it is answered as fast as it is refused above.
TEST_F(ServeBoundedInput, ThirtyMegabytePromptWithTruncationTokenizesOnlyItsTail) {
  const std::string body = json{{"prompt", thirty_megabyte_prompt()},
                                {"max_tokens", 1},
                                {"truncate_prompt_tokens", 16}}
                               .dump();
  const MemoryWatch memory(server_->pid());
  HttpClient c(port());
  c.send(boost::beast::http::verb::post, "/v1/completions", body);
  const auto sent = Clock::now();
  HttpResponse r = c.read_response();
  const double took = seconds_since(sent);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], 16) << r.body.substr(0, 300);
  // Tokenizing all 30 MB took 75 s with this SentencePiece model.
  EXPECT_LT(took, 10.0);
  std::printf("200 after %.3f s\n", took);
  // Accepted, the request keeps its prompt text (for echo, as vLLM keeps
  // it): body, parsed string and that copy, ~3 x 30 MB (+120 MB measured).
  memory.expect_growth_under(160u << 20);
}

// bad_words (found by a fresh-user attack: a 14 MB word grew the server to
// 3.4 GB): 256 KiB in all, and a word longer than the context, which can
// never be generated, is not tokenized at all.
TEST_F(ServeBoundedInput, BadWordsAreBounded) {
  std::string word;
  while (word.size() < 200'000) word += "dragon ";
  const MemoryWatch memory(server_->pid());
  HttpClient c(port());
  HttpResponse ok =
      c.post("/v1/completions",
             json{{"prompt", "Once"}, {"max_tokens", 2}, {"bad_words", {word, "the"}}}.dump());
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 300);
  EXPECT_EQ(json::parse(ok.body)["usage"]["completion_tokens"], 2);
  HttpResponse big =
      c.post("/v1/completions", json{{"prompt", "Once"}, {"bad_words", {word, word}}}.dump());
  ASSERT_EQ(big.status, 400) << big.body.substr(0, 300);
  EXPECT_EQ(json::parse(big.body)["error"]["param"], "bad_words");
  memory.expect_growth_under_100mb();
}

TEST_F(ServeBoundedInput, ThirtyMegabyteWebSocketMessageIsRefusedBeforeTokenizing) {
  json m{{"type", "completion"},
         {"id", "big"},
         {"prompt", thirty_megabyte_prompt()},
         {"max_tokens", 1}};
  const std::string text = m.dump();
  m = json();
  WsClient ws(port());
  const MemoryWatch memory(server_->pid());
  const auto start = Clock::now();
  ws.send_text(text);
  const json e = ws.read();
  const double took = seconds_since(start);
  ASSERT_EQ(e["type"], "error") << e.dump().substr(0, 300);
  EXPECT_EQ(e["id"], "big");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
  EXPECT_NE(e["error"]["message"].get<std::string>().find(
                "This model's maximum context length is 512 tokens."),
            std::string::npos)
      << e.dump();
  // Mostly the test client's own cost (Beast masks and writes the message
  // in 4 KB pieces): 0.7-2.6 s on a loaded 2-core machine, 8-10 s before
  // the fix (docs/PERFORMANCE.md). Tokenizing it would take minutes; the
  // memory checks below are the discriminating ones.
  EXPECT_LT(took, 30.0);
  std::printf("error after %.3f s\n", took);
  memory.expect_growth_under_100mb();
}

TEST_F(ServeBoundedInput, TooManyPromptsTimesNIsRefusedUpFront) {
  // 300,000 one-token prompts: counted, not parsed one by one.
  std::string many = "{\"max_tokens\":1,\"prompt\":[";
  for (int i = 0; i < 300000; ++i) many += i ? ",[1]" : "[1]";
  many += "]}";
  HttpClient c(port());
  HttpResponse r = c.post("/v1/completions", many);
  ASSERT_EQ(r.status, 400) << r.body;
  json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("300000 prompts x n=1"), std::string::npos)
      << e.dump();
  EXPECT_NE(e["message"].get<std::string>().find("--max-seqs-per-request"), std::string::npos)
      << e.dump();

  // 1000 prompts x n=128 = 128,000 sequences.
  json prompts = json::array();
  for (int i = 0; i < 1000; ++i) prompts.push_back("Once");
  r = c.post("/v1/completions", json{{"prompt", prompts}, {"n", 128}, {"max_tokens", 1}}.dump());
  ASSERT_EQ(r.status, 400) << r.body;
  e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("1000 prompts x n=128"), std::string::npos)
      << e.dump();

  // n alone over the limit: param n.
  r = c.post("/v1/completions",
             json{{"prompt", "Once"}, {"n", kSlowPrompts + 1}, {"max_tokens", 1}}.dump());
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "n");
}

TEST_F(ServeBoundedInput, TokenizeCountsPromptsPastMaxModelLenAsVllm) {
  // vLLM's /tokenize does not validate the context length: 600 tokens > 512.
  std::string text;
  for (int i = 0; i < 150; ++i) text += "Once upon a time ";
  json r = post_json(port(), "/tokenize", {{"prompt", text}});
  EXPECT_GT(r["count"].get<int>(), 512);
  EXPECT_EQ(r["max_model_len"], 512);
  // What must exceed it by the tokenizer's own bound is refused (work bound).
  r = post_json(port(), "/tokenize", {{"prompt", std::string(1u << 20, 'x')}}, 400);
  EXPECT_EQ(r["error"]["param"], "prompt");
  // A list is refused before any of it is tokenized.
  r = post_json(port(), "/tokenize", {{"prompt", json::array({"a", "b"})}}, 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("one prompt, got a list of 2"),
            std::string::npos);
}

TEST_F(ServeBoundedInput, HealthAnswersWhileABigRequestIsPreprocessed) {
  // One network thread, one preprocessing thread. The big request is
  // tokenizing (the pool's gauge says so) when /health is asked; /health
  // must answer at once, and the gauge must still show the job running
  // afterwards, so /health was served during it, not after.
  HttpClient big(port());
  big.send(boost::beast::http::verb::post, "/v1/completions", slow_body(kSlowPrompts, 600));
  ASSERT_TRUE(wait_metric_at_least(port(), "pagoda:preprocess_running", 1));
  const auto t = Clock::now();
  HttpClient h(port());
  EXPECT_EQ(h.get("/health").status, 200);
  EXPECT_LT(seconds_since(t), 2.0);
  EXPECT_EQ(metric_now(port(), "pagoda:preprocess_running"), 1)
      << "the big request was too quick to prove anything";

  // The queue holds one waiting job: a second POST waits, a third is a 503
  // with Retry-After.
  HttpClient queued(port());
  queued.send(boost::beast::http::verb::post, "/v1/completions",
              json{{"prompt", "Once"}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(wait_metric_at_least(port(), "pagoda:preprocess_queued", 1));
  HttpClient other(port());
  other.send(boost::beast::http::verb::post, "/v1/completions",
             json{{"prompt", "Once"}, {"max_tokens", 1}}.dump());
  std::string raw = other.read_until("\r\n\r\n");
  EXPECT_EQ(raw.rfind("HTTP/1.1 503", 0), 0u) << raw;
  EXPECT_NE(raw.find("Retry-After: 1"), std::string::npos) << raw;
  EXPECT_GE(metric_now(port(), "pagoda:preprocess_refused_total"), 1);
  EXPECT_EQ(metric_now(port(), "pagoda:preprocess_running"), 1);

  // The big request itself ends as it would have: every prompt tokenized,
  // then the context check of the first.
  HttpResponse r = big.read_response();
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "max_tokens");
  EXPECT_EQ(queued.read_response().status, 200);  // the queued one ran after it
}

// A preprocessing job running past --engine-hang-timeout makes /health 503
// (every input is bounded, so a job that long is a bug, and new requests
// wait for the pool); the big request here stands in for a stuck one with
// a 0.2 s timeout.
class ServePreprocessHang : public BundledServerSuite<ServePreprocessHang> {
 public:
  static std::vector<std::string> server_args() {
    return {std::string(PAGODA_SOURCE_DIR) + "/models/stories260K",
            "--preprocess-threads",
            "1",
            "--max-seqs-per-request",
            std::to_string(kSlowPrompts),
            "--engine-hang-timeout",
            "0.2"};
  }
};

TEST_F(ServePreprocessHang, HealthIs503WhileAJobRunsPastTheHangTimeout) {
  HttpClient big(port());
  big.send(boost::beast::http::verb::post, "/v1/completions", slow_body(kSlowPrompts, 600));
  ASSERT_TRUE(wait_metric_at_least(port(), "pagoda:preprocess_running", 1));
  // Polled until the job has run past 0.2 s; it runs for seconds.
  HttpResponse h;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  do {
    HttpClient c(port());
    h = c.get("/health");
  } while (h.status == 200 && metric_now(port(), "pagoda:preprocess_running") == 1 &&
           Clock::now() < deadline);
  ASSERT_EQ(h.status, 503) << "the job ended before /health saw it run long";
  EXPECT_NE(json::parse(h.body)["error"]["message"].get<std::string>().find(
                "A preprocessing thread has spent"),
            std::string::npos)
      << h.body;
  EXPECT_EQ(big.read_response().status, 400);
  // The answer is sent from inside the job: healthy again once it has
  // ended (the gauge back to 0).
  ASSERT_TRUE(wait_metric(port(), "pagoda:preprocess_running", [](double v) { return v == 0; }));
  HttpClient after(port());
  EXPECT_EQ(after.get("/health").status, 200);
}

TEST_F(ServeBoundedInput, ClientLeavingDuringPreprocessingLeavesNothingInTheEngine) {
  const double prompt_tokens_before = metric_now(port(), "pagoda:prompt_tokens_total");
  const double dropped_before = metric_now(port(), "pagoda:preprocess_dropped_total");
  {
    HttpClient big(port());
    big.send(boost::beast::http::verb::post, "/v1/completions", slow_body(kSlowPrompts, 1));
    ASSERT_TRUE(wait_metric_at_least(port(), "pagoda:preprocess_running", 1));
    big.close();
  }
  ASSERT_TRUE(wait_metric_at_least(port(), "pagoda:preprocess_dropped_total", dropped_before + 1));
  HttpClient c(port());
  const std::string m = c.get("/metrics").body;
  EXPECT_EQ(metric(m, "pagoda:num_requests_running"), 0);
  EXPECT_EQ(metric(m, "pagoda:num_requests_waiting"), 0);
  EXPECT_EQ(metric(m, "pagoda:prompt_tokens_total"), prompt_tokens_before);
  // The server goes on serving.
  EXPECT_EQ(c.post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 1}}.dump()).status,
            200);
}

// The chat side, on a model with a chat template.
class ServeBoundedChat : public BundledServerSuite<ServeBoundedChat> {
 public:
  static std::vector<std::string> server_args() {
    return {shared_path("models/tiny-random-qwen2-chat")};
  }
};

TEST_F(ServeBoundedChat, HundredThousandMessagesAreRefusedBeforeRendering) {
  json messages = json::array();
  for (int i = 0; i < 100000; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "hi"}});
  HttpClient c(port());
  const auto t = Clock::now();
  HttpResponse r =
      c.post("/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}.dump());
  ASSERT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_LT(seconds_since(t), 10.0);  // was 34 s of rendering; now the JSON parse
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "messages");
  EXPECT_EQ(e["message"],
            "'messages' has 100000 messages; the server allows at most 2048 per chat "
            "(--max-chat-messages)");
}

TEST_F(ServeBoundedChat, TokenizeMessagesPastMaxModelLenAreCountedAsVllm) {
  // vLLM's /tokenize does not check the context length for messages either
  // (it did here: a 400); a chat of ~6000 tokens against 4096.
  json messages = json::array();
  std::string words;
  for (int i = 0; i < 3000; ++i) words += "hello world ";
  messages.push_back({{"role", "user"}, {"content", words}});
  json r = post_json(port(), "/tokenize", {{"messages", messages}});
  EXPECT_GT(r["count"].get<int>(), r["max_model_len"].get<int>()) << r["count"];
  // The same chat for generation is the usual 400.
  r = post_json(port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}}, 400);
  EXPECT_EQ(r["error"]["param"], "messages");
}

}  // namespace
}  // namespace pagoda::testing_http
