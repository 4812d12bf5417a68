// pagoda-bench's reading of streams (loadtest/bench/backends.h): which
// chunks set TTFT and ITL, where the latency ends, where the output token
// count comes from — vLLM's rules per backend — and the request bodies.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "loadtest/bench/backends.h"
#include "loadtest/bench/metrics.h"

namespace pagoda::bench {
namespace {

using nlohmann::json;

TEST(BenchStream, CompletionsChunksTimeTtftItlAndLatency) {
  RequestResult r;
  StreamFolder f(Backend::kOpenAI, 1.0);
  EXPECT_FALSE(f.add(R"({"id":"cmpl-1","choices":[{"index":0,"text":"Once"}]})", 1.5, r));
  EXPECT_FALSE(
      f.add(R"({"id":"cmpl-1","choices":[{"index":0,"text":""}]})", 1.7, r));  // empty text counts
  EXPECT_FALSE(
      f.add(R"({"id":"cmpl-1","choices":[{"index":0,"text":" upon","finish_reason":"length"}]})",
            2.0, r));
  EXPECT_FALSE(f.add(
      R"({"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}})", 2.1, r));
  EXPECT_TRUE(f.add("[DONE]", 2.2, r));
  EXPECT_TRUE(f.saw_output());
  EXPECT_DOUBLE_EQ(r.ttft, 0.5);
  ASSERT_EQ(r.itl.size(), 2u);
  EXPECT_NEAR(r.itl[0], 0.2, 1e-12);
  EXPECT_NEAR(r.itl[1], 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(f.last_s(), 2.0);  // the last chunk with choices, not the usage chunk
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.generated_text, "Once upon");
  EXPECT_EQ(r.request_id, "cmpl-1");
}

TEST(BenchStream, ChatCountsDeltasAndEndsAtTheLastChunk) {
  RequestResult r;
  StreamFolder f(Backend::kOpenAIChat, 0.0);
  EXPECT_FALSE(f.add(
      R"({"id":"chatcmpl-9","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
      0.25, r));
  EXPECT_FALSE(
      f.add(R"({"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"Hi"}}]})", 0.5, r));
  EXPECT_FALSE(
      f.add(R"({"id":"chatcmpl-9","choices":[],"usage":{"completion_tokens":1}})", 0.75, r));
  EXPECT_TRUE(f.add("[DONE]", 0.8, r));
  EXPECT_DOUBLE_EQ(r.ttft, 0.25);
  EXPECT_EQ(r.itl, (std::vector<double>{0.25}));
  EXPECT_DOUBLE_EQ(f.last_s(), 0.75);  // vLLM's chat client: any chunk moves the end
  EXPECT_EQ(r.generated_text, "Hi");
  EXPECT_EQ(r.output_tokens, 1);
}

TEST(BenchStream, WebSocketDeltasThenDone) {
  RequestResult r;
  StreamFolder f(Backend::kPagodaWs, 0.0);
  EXPECT_FALSE(f.add(R"({"type":"stats","time":1})", 0.05, r));  // ignored
  EXPECT_FALSE(
      f.add(R"({"type":"delta","id":"b-1","seq":1,"index":0,"text":"a","token_ids":[5]})", 0.1, r));
  EXPECT_FALSE(f.add(
      R"({"type":"delta","id":"b-1","seq":3,"index":0,"text":"bc","token_ids":[6,7]})", 0.4, r));
  EXPECT_TRUE(f.add(
      R"({"type":"done","id":"b-1","seq":3,"finish_reason":"length","usage":{"completion_tokens":3}})",
      0.5, r));
  EXPECT_DOUBLE_EQ(r.ttft, 0.1);
  ASSERT_EQ(r.itl.size(), 1u);
  EXPECT_NEAR(r.itl[0], 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(f.last_s(), 0.4);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.generated_text, "abc");
}

TEST(BenchStream, ErrorsThrow) {
  RequestResult r;
  StreamFolder sse(Backend::kOpenAI, 0.0);
  EXPECT_THROW(sse.add(R"({"error":{"message":"boom","code":500}})", 0.1, r), std::runtime_error);
  EXPECT_THROW(sse.add("not json", 0.1, r), std::runtime_error);
  StreamFolder ws(Backend::kPagodaWs, 0.0);
  EXPECT_THROW(
      ws.add(R"({"type":"error","id":"x","error":{"message":"too long","code":400}})", 0.1, r),
      std::runtime_error);
  EXPECT_THROW(ws.add(R"({"type":"done","id":"x","finish_reason":"abort"})", 0.1, r),
               std::runtime_error);
}

TEST(BenchStream, UsagePromptTokensAreKept) {
  RequestResult r;
  StreamFolder f(Backend::kOpenAI, 0.0);
  f.add(R"({"id":"c","choices":[{"text":"a"}]})", 0.1, r);
  f.add(R"({"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1}})", 0.2, r);
  EXPECT_EQ(r.prompt_tokens, 12);
  RequestResult w;
  StreamFolder ws(Backend::kPagodaWs, 0.0);
  ws.add(R"({"type":"delta","id":"x","seq":1,"index":0,"text":"a"})", 0.1, w);
  ws.add(
      R"({"type":"done","id":"x","finish_reason":"length","usage":{"prompt_tokens":7,"completion_tokens":1}})",
      0.2, w);
  EXPECT_EQ(w.prompt_tokens, 7);
  EXPECT_EQ(w.request_id, "x");  // the client's message id: /v1/ws sends no server id
}

// A server's usage counts are taken only when they are counts (integers
// >= 0): negative ones, like non-integers, are ignored, so the tokenizer's
// output count and the dataset's prompt length are used and the totals and
// throughput stay positive (they came out negative).
TEST(BenchStream, NegativeOrNonIntegerUsageFallsBackToTheTokenizer) {
  const char* bad_usages[] = {
      R"({"prompt_tokens":-5,"completion_tokens":-3})",
      R"({"prompt_tokens":2.5,"completion_tokens":"3"})",
      R"({"prompt_tokens":18446744073709551615,"completion_tokens":-9223372036854775808})",
  };
  for (Backend b : {Backend::kOpenAI, Backend::kPagodaWs}) {
    for (const char* usage : bad_usages) {
      SCOPED_TRACE(usage);
      RequestResult r;
      r.prompt_len = 10;
      StreamFolder f(b, 0.0);
      if (b == Backend::kPagodaWs) {
        f.add(R"({"type":"delta","id":"x","seq":1,"index":0,"text":"a b"})", 0.1, r);
        EXPECT_TRUE(
            f.add(std::string(R"({"type":"done","id":"x","finish_reason":"length","usage":)") +
                      usage + "}",
                  0.2, r));
      } else {
        f.add(R"({"id":"c","choices":[{"text":"a b"}]})", 0.1, r);
        f.add(std::string(R"({"id":"c","choices":[],"usage":)") + usage + "}", 0.2, r);
      }
      EXPECT_FALSE(r.output_tokens.has_value()) << *r.output_tokens;
      EXPECT_FALSE(r.prompt_tokens.has_value()) << *r.prompt_tokens;
      r.success = true;
      r.ttft = 0.1;
      r.latency = 0.2;
      const auto words = [](const std::string& text) {
        return static_cast<int64_t>(std::count(text.begin(), text.end(), ' ') + 1);
      };
      const BenchmarkMetrics m = calculate_metrics({r}, 1.0, words, {99}, {});
      EXPECT_EQ(m.total_input, 10);
      EXPECT_EQ(m.total_output, 2);
      EXPECT_GT(m.output_throughput, 0);
    }
  }
  // Zero is a count.
  RequestResult z;
  StreamFolder f(Backend::kOpenAI, 0.0);
  f.add(R"({"id":"c","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0}})", 0.2, z);
  EXPECT_EQ(z.output_tokens, 0);
  EXPECT_EQ(z.prompt_tokens, 0);
}

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();  // the strict handler throws on invalid UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

TEST(BenchStream, ExcerptNeverCutsACharacter) {
  const std::string e = "\xc3\xa9";  // é: two bytes
  const std::string text = "x" + [&] {
    std::string s;
    for (int i = 0; i < 400; ++i) s += e;
    return s;
  }();
  // Byte 300 is the second byte of an é: cut before it.
  const std::string cut = excerpt(text);
  EXPECT_TRUE(valid_utf8(cut)) << cut;
  EXPECT_EQ(cut.size(), 299u + 3u);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ(excerpt("short"), "short");
  // Not UTF-8 at all (Latin-1): cut at the byte count, left as it is.
  EXPECT_EQ(excerpt(std::string(400, '\xe9')).size(), 303u);
  // A payload that is not JSON: the error quotes it, still valid UTF-8.
  RequestResult r;
  StreamFolder f(Backend::kOpenAI, 0.0);
  try {
    f.add("x" + text, 0.1, r);
    FAIL();
  } catch (const std::runtime_error& err) {
    EXPECT_TRUE(valid_utf8(err.what())) << err.what();
  }
}

TEST(BenchStream, ClientSideErrors) {
  namespace errc = boost::system::errc;
  EXPECT_TRUE(is_client_side_error(errc::make_error_code(errc::too_many_files_open)));
  EXPECT_TRUE(is_client_side_error(errc::make_error_code(errc::address_not_available)));
  EXPECT_FALSE(is_client_side_error(errc::make_error_code(errc::connection_refused)));
  EXPECT_FALSE(is_client_side_error(errc::make_error_code(errc::connection_reset)));
}

TEST(BenchStream, BaseUrlAsVllmJoinsIt) {
  BaseUrl u = parse_base_url("http://127.0.0.1:8123");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8123);
  EXPECT_EQ(u.path, "");
  u = parse_base_url("http://h:9000/v1/");
  EXPECT_EQ(u.host, "h");
  EXPECT_EQ(u.port, 9000);
  EXPECT_EQ(u.path, "/v1");
  u = parse_base_url("http://example.com");
  EXPECT_EQ(u.port, 80);
  u = parse_base_url("http://[::1]:8000/x");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(u.path, "/x");
  for (const char* bad :
       {"http://127.0.0.1:8123abc", "http://h:0", "http://h:65536", "http://h:", "http://:80",
        "https://h:443", "h:80", "http://h:80?x=1", "http://[::1", "http://h:-1"})
    EXPECT_THROW(parse_base_url(bad), std::invalid_argument) << bad;
}

TEST(BenchStream, EndpointGetsItsLeadingSlash) {
  EXPECT_EQ(normalize_endpoint("/v1/completions"), "/v1/completions");
  EXPECT_EQ(normalize_endpoint("v1/completions"), "/v1/completions");
  EXPECT_EQ(normalize_endpoint("completions?x=1"), "/completions?x=1");
  try {
    normalize_endpoint("http://127.0.0.1:8000/v1/completions");
    ADD_FAILURE() << "a URL was taken as a path";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--base-url"), std::string::npos) << e.what();
  }
  EXPECT_THROW(normalize_endpoint("/v1/com pletions"), std::invalid_argument);
  EXPECT_THROW(normalize_endpoint("/v1/\ncompletions"), std::invalid_argument);
}

TEST(BenchStream, RequestBodies) {
  SampleRequest s;
  s.prompt = "Once upon";
  s.prompt_token_ids = {1, 432, 383};
  s.expected_output_len = 7;
  RequestOptions o;
  o.model = "m";
  json c = json::parse(request_body(Backend::kOpenAI, s, o));
  EXPECT_EQ(c["prompt"], "Once upon");
  EXPECT_EQ(c["max_tokens"], 7);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  EXPECT_FALSE(c.contains("ignore_eos"));
  o.prompt_token_ids = true;
  o.ignore_eos = true;
  c = json::parse(request_body(Backend::kOpenAI, s, o));
  EXPECT_EQ(c["prompt"], (std::vector<int>{1, 432, 383}));
  EXPECT_EQ(c["ignore_eos"], true);
  json chat = json::parse(request_body(Backend::kOpenAIChat, s, o));
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["messages"][0]["content"][0]["text"], "Once upon");
  json ws = json::parse(request_body(Backend::kPagodaWs, s, o, "bench-1"));
  EXPECT_EQ(ws["type"], "completion");
  EXPECT_EQ(ws["id"], "bench-1");
  EXPECT_FALSE(ws.contains("stream"));
}

// --logprobs N: /v1/completions (and the WebSocket's completion) take the
// count as `logprobs`; /v1/chat/completions requires a boolean `logprobs`
// with the count in `top_logprobs` (an integer there fails every request).
TEST(BenchStream, RequestBodiesLogprobs) {
  SampleRequest s;
  s.prompt = "Once upon";
  s.expected_output_len = 7;
  RequestOptions o;
  o.model = "m";
  for (Backend b : {Backend::kOpenAI, Backend::kOpenAIChat, Backend::kPagodaWs}) {
    json body = json::parse(request_body(b, s, o, "bench-1"));
    EXPECT_FALSE(body.contains("logprobs"));
    EXPECT_FALSE(body.contains("top_logprobs"));
  }
  for (int n : {0, 2}) {
    o.logprobs = n;
    json c = json::parse(request_body(Backend::kOpenAI, s, o));
    EXPECT_EQ(c["logprobs"], n);
    EXPECT_FALSE(c.contains("top_logprobs"));
    json ws = json::parse(request_body(Backend::kPagodaWs, s, o, "bench-1"));
    EXPECT_EQ(ws["logprobs"], n);
    json chat = json::parse(request_body(Backend::kOpenAIChat, s, o));
    EXPECT_EQ(chat["logprobs"], true);
    EXPECT_EQ(chat["top_logprobs"], n);
  }
}

}  // namespace
}  // namespace pagoda::bench
