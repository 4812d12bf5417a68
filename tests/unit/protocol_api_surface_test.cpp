// Issue 5's protocol surface: batched prompts, n / best_of / logit_bias /
// logprobs / echo parsing, multi-choice and logprob response formats (both
// wire formats, hand-computed with the byte tokenizer), /generate,
// /tokenize, /detokenize, the API key and CORS gate, the OpenAPI document.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/html_escape.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/access_control.h"
#include "server/api_docs.h"
#include "server/generation_group.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/router.h"
#include "server/tokenize_endpoints.h"
#include "tests/integration/http_client.h"
#include "tests/unit/protocol_test_model.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_protocol::make_test_model;

ParsedRequest parse_ok(ParseResult r) {
  if (auto* e = std::get_if<OpenAIError>(&r)) ADD_FAILURE() << "unexpected error: " << e->body();
  return std::get<ParsedRequest>(r);
}

// Byte tokenizer ids: byte + 3.
int32_t id(char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)) + 3; }

TEST(ProtocolSurface, BatchedPromptsEachGetTheirIdsAndMaxTokens) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_completion_request(R"({"prompt": ["ab", "cde"], "n": 2})", m));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{1, id('a'), id('b')}));
  EXPECT_EQ(r.prompts[1].token_ids, (std::vector<int32_t>{1, id('c'), id('d'), id('e')}));
  EXPECT_EQ(r.prompts[0].max_tokens, 16);  // the completions default, per prompt
  EXPECT_EQ(r.prompts[1].max_tokens, 16);
  EXPECT_EQ(r.prompts[1].text, "cde");
  EXPECT_EQ(r.num_choices(), 4);
  ParsedRequest ids =
      parse_ok(parse_completion_request(R"({"prompt": [[5, 6], [7]], "max_tokens": 3})", m));
  ASSERT_EQ(ids.prompts.size(), 2u);
  EXPECT_EQ(ids.prompts[1].token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(ids.prompts[0].text, std::string("\x02\x03"));  // the ids decoded (byte = id - 3)
  EXPECT_EQ(ids.prompts[1].max_tokens, 3);
}

// /v1/completions without max_tokens: 16 (vLLM's CompletionRequest default),
// capped by the room left in the context (vLLM's get_max_tokens takes the
// smaller) per prompt; chat keeps max_model_len - prompt, as vLLM's chat.
TEST(ProtocolSurface, CompletionsDefaultMaxTokensIs16CappedByContext) {
  ServingModel m = make_test_model();      // max_model_len 64
  const std::string long_prompt(57, 'x');  // 58 ids with BOS: 6 left
  ParsedRequest r =
      parse_ok(parse_completion_request(json{{"prompt", {"ab", long_prompt}}}.dump(), m));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].max_tokens, 16);
  EXPECT_EQ(r.prompts[1].max_tokens, 64 - 58);
  EXPECT_EQ(r.sampling.max_tokens, 16);
  // Explicit values beyond 16 are kept.
  EXPECT_EQ(parse_ok(parse_completion_request(R"({"prompt": "ab", "max_tokens": 40})", m))
                .prompts[0]
                .max_tokens,
            40);
  // min_tokens above the default is vLLM's 400 (max_tokens=16).
  ParseResult e = parse_completion_request(R"({"prompt": "ab", "min_tokens": 20})", m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(e));
  EXPECT_NE(std::get<OpenAIError>(e).body().find("max_tokens=16"), std::string::npos);
  // Chat: max_model_len - rendered prompt ("<s>[user]ab[assistant]": 22 bytes).
  ParsedRequest c =
      parse_ok(parse_chat_request(R"({"messages": [{"role": "user", "content": "ab"}]})", m));
  EXPECT_EQ(c.sampling.max_tokens, 64 - 22);
}

TEST(ProtocolSurface, SamplingFieldsOfIssue5) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_completion_request(
      R"({"prompt": "x", "n": 2, "best_of": 4, "logit_bias": {"5": -100, "7": 2.5}, "logprobs": 3, "echo": false})",
      m));
  EXPECT_EQ(r.sampling.n, 2);
  EXPECT_EQ(r.sampling.best_of, 4);
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_EQ(r.sampling.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {7, 2.5f}}));
  EXPECT_FALSE(
      parse_ok(parse_completion_request(R"({"prompt": "x"})", m)).sampling.logprobs.has_value());
  EXPECT_EQ(
      parse_ok(parse_completion_request(R"({"prompt": "x", "logprobs": 0})", m)).sampling.logprobs,
      0);
  // best_of == n streams fine.
  parse_ok(parse_completion_request(R"({"prompt": "x", "n": 2, "best_of": 2, "stream": true})", m));
  // Chat: logprobs true → top_logprobs (default 0).
  ParsedRequest c = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "logprobs": true, "top_logprobs": 20, "n": 3})",
      m));
  EXPECT_EQ(c.sampling.logprobs, 20);
  EXPECT_EQ(c.sampling.n, 3);
  EXPECT_EQ(
      parse_ok(parse_chat_request(
                   R"({"messages": [{"role": "user", "content": "q"}], "logprobs": true})", m))
          .sampling.logprobs,
      0);
  EXPECT_FALSE(parse_ok(parse_chat_request(
                            R"({"messages": [{"role": "user", "content": "q"}], "logprobs": false,
                                               "top_logprobs": 0, "tool_choice": "none", "tools": []})",
                            m))
                   .sampling.logprobs.has_value());
  // Roles and content parts.
  ParsedRequest roles = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"},
          {"type": "text", "text": "b"}]}, {"role": "assistant", "content": "c"}, {"role": "tool", "content": "d",
          "tool_call_id": "t1"}], "add_generation_prompt": false, "user": "u1"})",
      m));
  EXPECT_EQ(roles.prompts[0].text, "<s>[system]s[user]a\nb[assistant]c[tool]d");
}

RequestOutput delta(int index, const std::string& text, std::vector<TokenLogprob> lps = {},
                    bool finished = false) {
  RequestOutput d;
  d.index = index;
  d.text = text;
  for (char c : text) d.token_ids.push_back(id(c));
  d.logprobs = std::move(lps);
  d.finished = finished;
  if (finished) d.finish_reason = FinishReason::kLength;
  return d;
}

// Engine deltas through the request pipeline's assembler, as
// GenerationGroup::drain() hands them to the formatter.
struct Assembled {
  explicit Assembled(const ParsedRequest& req) : a(req) {}
  std::vector<ChoiceDelta> operator()(const std::vector<RequestOutput>& ds) {
    std::vector<ChoiceDelta> out;
    for (const RequestOutput& d : ds) out.push_back(a.add(d));
    return out;
  }
  ChoiceAssembler a;
};

TEST(ProtocolSurface, CompletionLogprobsObjectByHand) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": "ab", "logprobs": 1, "max_tokens": 2})", m));
  RequestOutput out = delta(0, "hé", {}, true);  // 'h', then 2 bytes of é
  out.token_ids = {id('h'), 0xC3 + 3, 0xA9 + 3};
  out.logprobs = {{id('h'), -0.5f, {{id('h'), -0.5f}}},
                  {0xC3 + 3, -1.25f, {{id('x'), -0.25f}}},
                  {0xA9 + 3, -std::numeric_limits<float>::infinity(), {}}};
  out.completion_tokens = 3;
  json j = completion_response(r, out);
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -1.25, -9999.0}));  // -inf clamped as vLLM does
  EXPECT_EQ(lp["tokens"][0], "h");
  // Characters (code points) before each token: 'h' is 1, the lead byte
  // 0xC3 starts a character (1), its continuation byte adds none.
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  EXPECT_EQ(lp["top_logprobs"][0], json({{"h", -0.5}}));
  EXPECT_EQ(lp["top_logprobs"][1]["x"], -0.25);  // top-1 plus the sampled token
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u);
}

TEST(ProtocolSurface, ChatLogprobsContentByHand) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "logprobs": true, "top_logprobs": 2})",
      m));
  RequestOutput out = delta(0, "ok",
                            {{id('o'), -0.1f, {{id('o'), -0.1f}, {id('a'), -2.0f}}},
                             {id('k'), -0.2f, {{id('k'), -0.2f}, {id('b'), -3.0f}}}},
                            true);
  json j = completion_response(r, out);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "o");
  EXPECT_NEAR(content[0]["logprob"].get<double>(), -0.1, 1e-6);
  EXPECT_EQ(content[0]["bytes"], json({'o'}));
  EXPECT_EQ(content[1]["top_logprobs"][1]["token"], "b");
  EXPECT_NEAR(content[1]["top_logprobs"][1]["logprob"].get<double>(), -3.0, 1e-6);
  EXPECT_EQ(content[1]["top_logprobs"][1]["bytes"], json({'b'}));
}

TEST(ProtocolSurface, MultiChoiceResponseAndUsage) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": ["ab", "c"], "n": 2, "echo": true})", m));
  std::vector<RequestOutput> choices;
  for (int i = 0; i < 4; ++i) {
    choices.push_back(delta(i, std::string(1, static_cast<char>('w' + i)), {}, true));
    choices.back().completion_tokens = 1 + i;
  }
  json j = completion_response(r, choices);
  ASSERT_EQ(j["choices"].size(), 4u);
  EXPECT_EQ(j["choices"][0]["text"], "abw");  // echo: the choice's prompt first
  EXPECT_EQ(j["choices"][1]["text"], "abx");
  EXPECT_EQ(j["choices"][2]["text"], "cy");  // index 2 = prompt 1, sample 0
  EXPECT_EQ(j["choices"][3]["index"], 3);
  EXPECT_EQ(
      j["usage"],
      json({{"prompt_tokens", 3 + 2}, {"completion_tokens", 1 + 2 + 3 + 4}, {"total_tokens", 15}}));
}

TEST(ProtocolSurface, StreamInterleavedChoicesUsageAfterTheLast) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(parse_chat_request(
      R"({"messages": [{"role": "user", "content": "q"}], "n": 2, "stream": true,
          "stream_options": {"include_usage": true}})",
      m));
  StreamFormatter f(r);
  Assembled pipe(r);
  auto events = testing_http::sse_payloads(f.begin());
  ASSERT_EQ(events.size(), 2u);  // a role chunk per choice
  EXPECT_EQ(json::parse(events[1])["choices"][0]["index"], 1);
  RequestOutput a = delta(0, "x"), b = delta(1, "y"), a2 = delta(0, "z", {}, true),
                b2 = delta(1, "", {}, true);
  a2.completion_tokens = 2;
  b2.completion_tokens = 1;
  std::string s = f.format(pipe({a, b, a2}));
  events = testing_http::sse_payloads(s);
  ASSERT_EQ(events.size(), 3u);  // choice 0 "x", choice 1 "y", choice 0 "z" finished
  EXPECT_EQ(json::parse(events[2])["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(f.done());
  events = testing_http::sse_payloads(f.format(pipe({b2})));
  ASSERT_EQ(events.size(), 3u);  // choice 1 finish, usage, [DONE]
  json usage = json::parse(events[1]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(events[2], "[DONE]");
  EXPECT_TRUE(f.done());
}

TEST(ProtocolSurface, GenerateEndpointFormats) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_generate_request(R"({"prompt": "ab", "n": 2, "temperature": 0.5})", m));
  EXPECT_EQ(r.kind, ApiKind::kGenerate);
  EXPECT_EQ(r.sampling.max_tokens, 16);  // vLLM SamplingParams default
  json j = completion_response(
      r, std::vector<RequestOutput>{delta(0, "c", {}, true), delta(1, "d", {}, true)});
  EXPECT_EQ(j, json({{"text", {"abc", "abd"}}}));
  ParsedRequest s = parse_ok(parse_generate_request(R"({"prompt": "ab", "stream": true})", m));
  StreamFormatter f(s);
  Assembled pipe(s);
  EXPECT_EQ(f.begin(), "");
  std::string out = f.format(pipe({delta(0, "c")}));
  out += f.format(pipe({delta(0, "d", {}, true)}));
  EXPECT_EQ(out, std::string(R"({"text":["abc"]})") + '\0' + R"({"text":["abcd"]})" + '\0');
  EXPECT_TRUE(f.done());
  EXPECT_STREQ(stream_content_type(s), "application/json");
  auto bad = parse_generate_request(R"({"prompt": 3})", m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(bad));
  EXPECT_EQ(std::get<OpenAIError>(bad).param, "prompt");
}

TEST(ProtocolSurface, TokenizeAndDetokenize) {
  ServingModel m = make_test_model();
  auto t = tokenize_request(R"({"prompt": "ab"})", m);
  ASSERT_TRUE(std::holds_alternative<json>(t));
  EXPECT_EQ(std::get<json>(t), json({{"count", 3},
                                     {"max_model_len", 64},
                                     {"tokens", {1, id('a'), id('b')}},
                                     {"token_strs", nullptr}}));
  auto no_bos = tokenize_request(R"({"prompt": "ab", "add_special_tokens": false})", m);
  EXPECT_EQ(std::get<json>(no_bos)["count"], 2);
  auto chat = tokenize_request(R"({"messages": [{"role": "user", "content": "q"}]})", m);
  ParsedRequest as_chat =
      parse_ok(parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}]})", m));
  EXPECT_EQ(std::get<json>(chat)["tokens"],
            json(as_chat.prompt_token_ids));  // what chat would send
  auto d = detokenize_request(R"({"tokens": [1, 100, 101]})", m);
  EXPECT_EQ(std::get<json>(d), json({{"prompt", "<s>ab"}}));
  for (const char* body : {R"({"tokens": [1, 999]})", R"({"tokens": "ab"})", R"({})"}) {
    auto e = detokenize_request(body, m);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(e)) << body;
    EXPECT_EQ(std::get<OpenAIError>(e).param, "tokens");
  }
  auto e = tokenize_request(R"({"prompt": 5})", m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(e));
  EXPECT_EQ(std::get<OpenAIError>(e).param, "prompt");
}

// Qwen2's model has 151,936 embedding rows and its tokenizer 151,665
// tokens: every id the model can generate decodes, those without a token to
// "" (as HF's decode); ids beyond the model's rows are still a 400.
TEST(ProtocolSurface, DetokenizeAcceptsEveryIdTheModelCanGenerate) {
  ServingModel m = make_test_model();
  m.tokenizer = load_tokenizer(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat");
  m.model_vocab_size = 151936;
  ASSERT_LT(m.tokenizer->vocab_size(), 151936);
  const int32_t last = static_cast<int32_t>(m.tokenizer->vocab_size()) - 1;
  const std::string last_text = m.tokenizer->decode(std::vector<int32_t>{last}, false);
  auto d = detokenize_request(fmt::format(R"({{"tokens": [{}, {}, 151935]}})", last, last + 1), m);
  ASSERT_TRUE(std::holds_alternative<json>(d)) << std::get<OpenAIError>(d).body();
  EXPECT_EQ(std::get<json>(d), json({{"prompt", last_text}}));
  auto e = detokenize_request(R"({"tokens": [151936]})", m);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(e));
  EXPECT_EQ(std::get<OpenAIError>(e).param, "tokens");
  EXPECT_NE(std::get<OpenAIError>(e).message.find("151936"), std::string::npos);
}

// /tokenize parses 'prompt' exactly as /v1/completions does: a token-id list
// is taken as given, special-token text becomes its id, the same errors.
TEST(ProtocolSurface, TokenizeParsesPromptsAsCompletionsDoes) {
  ServingModel m = make_test_model();
  for (const char* prompt : {R"("<s>ab")", R"([1, 100, 101])", R"(["ab"])", R"([[5, 6]])"}) {
    std::string body = std::string(R"({"prompt": )") + prompt + "}";
    auto t = tokenize_request(body, m);
    ASSERT_TRUE(std::holds_alternative<json>(t)) << body << ": " << std::get<OpenAIError>(t).body();
    ParsedRequest c = parse_ok(parse_completion_request(body, m));
    EXPECT_EQ(std::get<json>(t)["tokens"], json(c.prompt_token_ids)) << body;
  }
  for (const char* body :
       {R"({"prompt": [1, 999]})", R"({"prompt": ["a", "b"]})", R"({"prompt": []})", R"({})"}) {
    auto e = tokenize_request(body, m);
    ASSERT_TRUE(std::holds_alternative<OpenAIError>(e)) << body;
    EXPECT_EQ(std::get<OpenAIError>(e).param, "prompt") << body;
  }
  // "" is tokenized (vLLM: count 0, or the BOS alone), though generation refuses it.
  auto empty = tokenize_request(R"({"prompt": "", "add_special_tokens": false})", m);
  ASSERT_TRUE(std::holds_alternative<json>(empty)) << std::get<OpenAIError>(empty).body();
  EXPECT_EQ(std::get<json>(empty)["count"], 0);
  auto bos = tokenize_request(R"({"prompt": ""})", m);
  ASSERT_TRUE(std::holds_alternative<json>(bos)) << std::get<OpenAIError>(bos).body();
  EXPECT_EQ(std::get<json>(bos)["tokens"], json(m.tokenizer->encode("", true)));
}

TEST(ProtocolSurface, ApiKeyGate) {
  namespace http = boost::beast::http;
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(path_requires_key("/v1/completions?x=1"));
  EXPECT_TRUE(path_requires_key("/v1/models"));
  EXPECT_TRUE(path_requires_key("/tokenize"));
  EXPECT_FALSE(path_requires_key("/health"));
  EXPECT_FALSE(path_requires_key("/metrics"));
  EXPECT_FALSE(path_requires_key("/version"));
  AccessPolicy p;
  EXPECT_FALSE(
      check_access(p, http::verb::post, "/v1/completions", "", "", ""));  // no key configured
  p.api_key = "k3y";
  auto denied = check_access(p, http::verb::post, "/v1/completions", "", "", "");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "AuthenticationError");
  EXPECT_TRUE(check_access(p, http::verb::post, "/v1/completions", "Bearer k3", "", ""));
  EXPECT_TRUE(check_access(p, http::verb::post, "/generate", "k3y", "", ""));
  EXPECT_FALSE(check_access(p, http::verb::post, "/v1/completions", "Bearer k3y", "", ""));
  EXPECT_FALSE(check_access(p, http::verb::get, "/health", "", "", ""));
}

TEST(ProtocolSurface, WebSocketUpgradeNeedsTheKeyInHeaderOrQuery) {
  AccessPolicy p;
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws", ""));  // no key configured
  p.api_key = "k3y";
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws", ""));
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws", "Bearer k3y"));
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws", "Bearer k3"));
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws?api_key=k3y", ""));
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws?x=1&api_key=k3y", ""));
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws?api_key=k3yy", ""));
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws?xapi_key=k3y", ""));
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws?api_key=", ""));
  // The query value is percent-decoded (browsers: encodeURIComponent).
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws?api_key=k%33y", ""));
  p.api_key = "k/y+z=1 @%";
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws?api_key=k%2Fy%2Bz%3D1%20%40%25", ""));
  EXPECT_TRUE(websocket_access_ok(p, "/v1/ws?api_key=k/y+z=1%20@%25", ""));
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws?api_key=k%2Fy%2Bz%3D1%20%40%2", ""));   // cut escape
  EXPECT_FALSE(websocket_access_ok(p, "/v1/ws?api_key=k%2Fy%2Bz%3D1%20%40%zz", ""));  // bad escape
}

TEST(ProtocolSurface, Cors) {
  namespace http = boost::beast::http;
  AccessPolicy p;
  EXPECT_TRUE(cors_headers(p, "http://a.example").empty());
  EXPECT_FALSE(check_access(p, http::verb::options, "/v1/completions", "", "http://a.example", ""));
  p.allowed_origins = parse_allowed_origins({"http://a.example, http://b.example"});
  ASSERT_EQ(p.allowed_origins.size(), 2u);
  EXPECT_EQ(cors_headers(p, "http://b.example"),
            (HeaderList{{"Access-Control-Allow-Origin", "http://b.example"}, {"Vary", "Origin"}}));
  EXPECT_TRUE(cors_headers(p, "http://c.example").empty());
  p.api_key = "k";
  auto pre = check_access(p, http::verb::options, "/v1/completions", "", "http://a.example",
                          "authorization");
  ASSERT_TRUE(pre);  // a preflight needs no key
  EXPECT_EQ(pre->status, 200);
  auto bad = check_access(p, http::verb::options, "/v1/completions", "", "http://c.example", "");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  p.allowed_origins = parse_allowed_origins({R"(["*"])"});
  EXPECT_EQ(cors_headers(p, "http://z.example"),
            (HeaderList{{"Access-Control-Allow-Origin", "*"}}));
  EXPECT_THROW(parse_allowed_origins({"[1]"}), std::invalid_argument);
}

TEST(ProtocolSurface, OpenApiDocumentListsEveryRoute) {
  json spec = json::parse(openapi_json());
  EXPECT_EQ(spec["openapi"].get<std::string>().substr(0, 2), "3.");
  for (const char* path :
       {"/v1/completions", "/v1/chat/completions", "/v1/models", "/tokenize", "/detokenize",
        "/generate", "/health", "/version", "/metrics", "/openapi.json", "/docs"})
    EXPECT_TRUE(spec["paths"].contains(path)) << path;
  // Every documented route is served (not 404) by the router.
  ServerContext ctx;
  ctx.model = make_test_model();
  Router router(ctx);
  for (const auto& [path, ops] : spec["paths"].items())
    for (const auto& [method, op] : ops.items()) {
      auto verb = method == "get" ? boost::beast::http::verb::get : boost::beast::http::verb::post;
      RouteResult r = router.route(verb, path, "{}", "application/json");
      EXPECT_NE(r.status, 404) << method << " " << path << ": " << r.body;
    }
  std::string html = docs_html();
  EXPECT_NE(html.find("/v1/chat/completions"), std::string::npos);
  EXPECT_NE(html.find("top_logprobs"), std::string::npos);
}

// The docs page and Jinja's `escape` filter share one escaper, MarkupSafe's:
// & < > " ' -> &amp; &lt; &gt; &#34; &#39; (markupsafe.escape("<a href=\"x\">'&'")).
TEST(ProtocolSurface, HtmlEscapeMatchesMarkupSafe) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'"), "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;");
  EXPECT_EQ(html_escape("\xe4\xb8\xad plain"), "\xe4\xb8\xad plain");  // UTF-8 bytes pass through
}

// Records submitted requests; the test pushes their deltas by hand.
class RecordingEngine final : public EngineHandle {
 public:
  void add_request(std::unique_ptr<GenerateRequest> r) override {
    requests.push_back(std::move(r));
  }
  void abort_request(const std::string& rid) override { aborted.push_back(rid); }
  EngineStats stats() const override { return {}; }
  bool running() const override { return true; }
  std::vector<std::unique_ptr<GenerateRequest>> requests;
  std::vector<std::string> aborted;
};

TEST(ProtocolSurface, GenerationGroupRemapsChoiceIndices) {
  ServingModel m = make_test_model();
  ParsedRequest r =
      parse_ok(parse_completion_request(R"({"prompt": ["ab", "c"], "n": 2, "max_tokens": 5})", m));
  RecordingEngine engine;
  int notified = 0;
  GenerationGroup g(r, engine, [&] { ++notified; });
  EXPECT_TRUE(engine.requests.empty());  // nothing before submit()
  g.submit();
  ASSERT_EQ(engine.requests.size(), 2u);
  // vLLM's "<id>-<i>" per prompt, made unique in the process by a
  // "#<serial>" suffix; the logs name the request without it.
  EXPECT_EQ(engine.requests[0]->request_id.rfind(r.request_id + "-0#", 0), 0u);
  EXPECT_EQ(engine.requests[1]->request_id.rfind(r.request_id + "-1#", 0), 0u);
  EXPECT_EQ(engine.requests[0]->external_request_id, r.request_id + "-0");
  EXPECT_EQ(engine.requests[1]->external_request_id, r.request_id + "-1");
  EXPECT_EQ(engine.requests[1]->prompt_token_ids, (std::vector<int32_t>{1, id('c')}));
  EXPECT_EQ(engine.requests[1]->sampling.n, 2);
  engine.requests[1]->output->push(delta(1, "q", {}, true));
  engine.requests[0]->output->push(delta(0, "p", {}, true));
  EXPECT_EQ(notified, 2);
  auto d = g.drain();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].index, 0);  // prompt 0 sample 0
  EXPECT_EQ(d[1].index, 3);  // prompt 1 sample 1
  EXPECT_FALSE(g.done());
  g.abort();  // both sub-requests still have an unfinished choice
  EXPECT_EQ(engine.aborted.size(), 2u);
  engine.requests[0]->output->push(delta(1, "", {}, true));
  engine.requests[1]->output->push(delta(0, "", {}, true));
  g.drain();
  EXPECT_TRUE(g.done());
  EXPECT_FALSE(g.failed());
}

// The pipeline's per-choice results: echo in each choice's first delta (as
// vLLM streams it), logprobs in the request's wire format per delta and
// joined per choice, usage with each prompt once.
TEST(ProtocolSurface, GenerationGroupAssemblesEchoLogprobsAndUsage) {
  ServingModel m = make_test_model();
  ParsedRequest r = parse_ok(
      parse_completion_request(R"({"prompt": ["ab", "c"], "max_tokens": 2, "echo": true})", m));
  RecordingEngine engine;
  GenerationGroup g(r, engine, [] {});
  g.submit();
  ASSERT_EQ(engine.requests.size(), 2u);
  RequestOutput x = delta(0, "x");
  x.completion_tokens = 1;
  RequestOutput y = delta(0, "y", {}, true);
  y.completion_tokens = 2;
  RequestOutput z = delta(0, "z", {}, true);
  z.completion_tokens = 1;
  engine.requests[0]->output->push(x);
  engine.requests[1]->output->push(z);
  engine.requests[0]->output->push(y);
  std::vector<ChoiceDelta> d = g.drain();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].text, "abx");  // prompt 0's text, then its first token's
  EXPECT_EQ(d[1].text, "y");
  EXPECT_EQ(d[2].index, 1);
  EXPECT_EQ(d[2].text, "cz");
  EXPECT_EQ(d[2].prompt_tokens, 2);  // BOS + 'c'
  ASSERT_TRUE(g.done());
  EXPECT_EQ(g.choices()[0].text, "abxy");
  EXPECT_EQ(g.choices()[0].token_ids, (std::vector<int32_t>{id('x'), id('y')}));
  EXPECT_EQ(g.choices()[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(g.prompt_tokens(), 3 + 2);
  EXPECT_EQ(g.completion_tokens(), 2 + 1);
  EXPECT_EQ(completion_response(g.request(), g.choices())["choices"][1]["text"], "cz");

  ParsedRequest lr =
      parse_ok(parse_completion_request(R"({"prompt": "ab", "max_tokens": 2, "logprobs": 1})", m));
  GenerationGroup lg(lr, engine, [] {});
  lg.submit();
  engine.requests.back()->output->push(delta(0, "h", {{id('h'), -0.5f, {{id('h'), -0.5f}}}}));
  engine.requests.back()->output->push(
      delta(0, "i", {{id('i'), -1.5f, {{id('x'), -0.25f}}}}, true));
  std::vector<ChoiceDelta> ld = lg.drain();
  ASSERT_EQ(ld.size(), 2u);
  EXPECT_EQ(ld[1].logprobs["tokens"], nlohmann::ordered_json({"i"}));
  EXPECT_EQ(ld[1].logprobs["text_offset"], nlohmann::ordered_json({1}));  // after "h"
  EXPECT_EQ(lg.choices()[0].logprobs["token_logprobs"], nlohmann::ordered_json({-0.5, -1.5}));
  EXPECT_EQ(lg.choices()[0].logprobs["text_offset"], nlohmann::ordered_json({0, 1}));
}

}  // namespace
}  // namespace pagoda
