// The real `pagoda serve` on the bundled stories260K (no MODEL_DIR: the
// default lookup), greedy, against llama2.c's outputs; errors under load;
// chat with the Llama-2-chat template; clean shutdown.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <memory>
#include <thread>

#include "engine/tokenizer/tokenizer.h"
#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeStories : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new PagodaServer({}); }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "pagoda did not exit cleanly: " << status;
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  static PagodaServer* server_;
};
PagodaServer* ServeStories::server_ = nullptr;

// llama2.c's run.c output for "Once upon a time", 256 positions (the prompt's
// 5 tokens + 252 generated, greedy). run.c prints the prompt, the
// generation, then printf("\n") when done: that final newline is not model
// output (the 252 greedy ids hold three newline tokens, the file four).
std::string expected_once_upon_a_time() {
  std::string t = read_text_file(shared_path("testvectors/stories260K_runc_greedy_once_upon_a_time.txt"));
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.back(), '\n');
  t.pop_back();
  return t;
}

TEST_F(ServeStories, StdoutHasOnlyTheListeningLine) {
  EXPECT_EQ(server_->stdout_before(), "");
  EXPECT_EQ(server_->listening_line(), "Pagoda listening on http://127.0.0.1:" + std::to_string(port()));
}

TEST_F(ServeStories, GreedyCompletionMatchesLlama2c) {
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", "Once upon a time"}, {"max_tokens", 252}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ("Once upon a time" + r["choices"][0]["text"].get<std::string>(), expected_once_upon_a_time());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"], (json{{"prompt_tokens", 5}, {"completion_tokens", 252}, {"total_tokens", 257}}));
}

TEST_F(ServeStories, StreamedDeltasJoinToTheSameText) {
  StreamResult s = stream_request(port(), "/v1/completions",
                                  {{"prompt", "Once upon a time"},
                                   {"max_tokens", 252},
                                   {"temperature", 0},
                                   {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_TRUE(s.done);
  EXPECT_EQ("Once upon a time" + s.text, expected_once_upon_a_time());
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 252);
  EXPECT_EQ(s.usage["prompt_tokens"], 5);
}

// Checks a stream sent with stream_options {include_usage, continuous_usage_stats}
// (vLLM's behaviour): every chunk with a choice carries usage {prompt_tokens of
// that choice's prompt, completion_tokens = the ids that choice has streamed
// so far (return_token_ids), total_tokens = their sum}; the last chunk before
// [DONE] has no choices and the whole request's usage. Returns the choices'
// completion token counts.
std::vector<int64_t> check_continuous_usage(const HttpResponse& r, const std::vector<int64_t>& prompt_tokens) {
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<std::string> events = sse_payloads(r.body);
  EXPECT_GE(events.size(), 3u);
  if (events.size() < 3) return {};
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<int64_t> streamed(prompt_tokens.size(), 0);
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json j = json::parse(events[i]);
    SCOPED_TRACE(events[i]);
    EXPECT_EQ(j["choices"].size(), 1u);
    if (j["choices"].size() != 1) continue;
    size_t index = j["choices"][0]["index"].get<size_t>();
    EXPECT_LT(index, prompt_tokens.size());
    if (index >= prompt_tokens.size()) continue;
    if (j["choices"][0].contains("token_ids")) streamed[index] += static_cast<int64_t>(j["choices"][0]["token_ids"].size());
    EXPECT_EQ(j["usage"], (json{{"prompt_tokens", prompt_tokens[index]},
                               {"completion_tokens", streamed[index]},
                               {"total_tokens", prompt_tokens[index] + streamed[index]}}));
  }
  json last = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(last["choices"].empty()) << last.dump();
  int64_t prompt_sum = 0, completion_sum = 0;
  for (size_t i = 0; i < prompt_tokens.size(); ++i) {
    prompt_sum += prompt_tokens[i];
    completion_sum += streamed[i];
  }
  EXPECT_EQ(last["usage"], (json{{"prompt_tokens", prompt_sum},
                                {"completion_tokens", completion_sum},
                                {"total_tokens", prompt_sum + completion_sum}}));
  return streamed;
}

TEST_F(ServeStories, ContinuousUsageStatsPutUsageSoFarInEveryChunk) {
  json ref = read_json_file(shared_path("testvectors/stories260K_greedy.json"));
  const int64_t dog_prompt_tokens = static_cast<int64_t>(ref["cases"][2]["prompt_ids"].size());  // "The little dog"
  json body = {{"prompt", {"Once upon a time", "The little dog"}},
               {"max_tokens", 32},
               {"temperature", 0},
               {"ignore_eos", true},
               {"return_token_ids", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  HttpClient c(port());
  std::vector<int64_t> streamed = check_continuous_usage(c.post("/v1/completions", body.dump()), {5, dog_prompt_tokens});
  EXPECT_EQ(streamed, (std::vector<int64_t>{32, 32}));
  // Without continuous_usage_stats only the final chunk has usage.
  body["stream_options"] = {{"include_usage", true}};
  HttpClient c2(port());
  std::vector<std::string> events = sse_payloads(c2.post("/v1/completions", body.dump()).body);
  ASSERT_GE(events.size(), 3u);
  for (size_t i = 0; i + 2 < events.size(); ++i) EXPECT_TRUE(json::parse(events[i])["usage"].is_null()) << events[i];
}

TEST_F(ServeStories, TokenIdPromptsGiveTheReferenceGreedyIds) {
  json ref = read_json_file(shared_path("testvectors/stories260K_greedy.json"));
  auto tok = load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  for (const json& c : ref["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    json body = {{"prompt", prompt_ids}, {"max_tokens", greedy.size()}, {"temperature", 0}, {"return_token_ids", true}};
    json r = post_json(port(), "/v1/completions", body);
    EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), greedy);
    EXPECT_EQ(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), prompt_ids);  // as given
    EXPECT_EQ(r["usage"]["prompt_tokens"], prompt_ids.size());
    // The text is the reference ids' text in the prompt's context.
    std::vector<int32_t> all = prompt_ids;
    all.insert(all.end(), greedy.begin(), greedy.end());
    std::string full = tok->decode(all, true), head = tok->decode(prompt_ids, true);
    ASSERT_EQ(full.compare(0, head.size(), head), 0);
    EXPECT_EQ(r["choices"][0]["text"], full.substr(head.size()));
    // Streamed: same ids, same text.
    StreamResult s = stream_request(port(), "/v1/completions", body);
    EXPECT_EQ(s.token_ids, greedy);
    EXPECT_EQ(s.text, r["choices"][0]["text"].get<std::string>());
  }
}

TEST_F(ServeStories, StringPromptGetsBosOnce) {
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", "The little dog"}, {"max_tokens", 3}, {"temperature", 0}, {"return_token_ids", true}});
  json ref = read_json_file(shared_path("testvectors/stories260K_greedy.json"));
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"], ref["cases"][2]["prompt_ids"]);  // [BOS] + encode
}

// No max_tokens: 16 tokens at most (vLLM's CompletionRequest default, OpenAI's
// legacy completions), exactly 16 when EOS cannot end it earlier.
TEST_F(ServeStories, CompletionsDefaultToSixteenTokens) {
  json plain = post_json(port(), "/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}});
  EXPECT_LE(plain["usage"]["completion_tokens"].get<int64_t>(), 16);
  EXPECT_GE(plain["usage"]["completion_tokens"].get<int64_t>(), 1);
  json full = post_json(port(), "/v1/completions", {{"prompt", "Once upon a time"}, {"ignore_eos", true}});
  EXPECT_EQ(full["usage"]["completion_tokens"], 16);
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  // Streamed: the same cap.
  StreamResult s = stream_request(port(), "/v1/completions",
                                  {{"prompt", "The little dog"}, {"ignore_eos", true}, {"stream", true},
                                   {"stream_options", {{"include_usage", true}}}});
  ASSERT_TRUE(s.usage.is_object()) << s.error_body;
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 16);
}

TEST_F(ServeStories, ChatWithoutTemplateIs400) {
  HttpClient c(port());
  HttpResponse r = c.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(r.status, 400);
  json e = json::parse(r.body);
  EXPECT_EQ(e["error"]["type"], "BadRequestError");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("no chat template"), std::string::npos) << r.body;
}

TEST_F(ServeStories, BadInputGetsItsErrorWhileAStreamFinishesUnharmed) {
  json long_body = {{"prompt", "The little dog"}, {"max_tokens", 400}, {"temperature", 0}};
  json alone = post_json(port(), "/v1/completions", long_body);
  StreamResult concurrent;
  std::thread streamer([&] { concurrent = stream_request(port(), "/v1/completions", long_body); });

  struct Case {
    const char* method;
    const char* path;
    std::string body;
    int status;
    const char* type;
    const char* param;  // "" = null
  };
  const Case cases[] = {
      {"POST", "/v1/completions", "{\"prompt\": ", 400, "BadRequestError", ""},
      {"POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400, "BadRequestError", "max_tokens"},
      {"POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 600})", 400, "BadRequestError", "max_tokens"},
      {"POST", "/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "BadRequestError", "temperature"},
      {"POST", "/v1/completions", R"({"max_tokens": 5})", 400, "BadRequestError", "prompt"},
      {"POST", "/v1/completions", R"({"prompt": [1, 99999]})", 400, "BadRequestError", "prompt"},
      {"POST", "/v1/completions", R"({"prompt": "x", "n": 0})", 400, "BadRequestError", "n"},
      {"POST", "/v1/completions", R"({"prompt": "x", "logprobs": 21})", 400, "BadRequestError", "logprobs"},
      {"POST", "/v1/completions", R"({"prompt": "x", "model": "gpt-4o"})", 404, "NotFoundError", "model"},
      {"GET", "/v1/nope", "", 404, "NotFoundError", ""},
      {"GET", "/v1/completions", "", 405, "MethodNotAllowedError", ""},
      {"POST", "/metrics", "", 405, "MethodNotAllowedError", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.path + " " + c.body);
    HttpClient client(port());
    HttpResponse r = client.request(std::string(c.method) == "GET" ? boost::beast::http::verb::get
                                                                   : boost::beast::http::verb::post,
                                    c.path, c.body);
    EXPECT_EQ(r.status, c.status);
    json e = json::parse(r.body);
    EXPECT_EQ(e["error"]["code"], c.status);
    EXPECT_EQ(e["error"]["type"], c.type);
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
    if (*c.param) EXPECT_EQ(e["error"]["param"], c.param); else EXPECT_TRUE(e["error"]["param"].is_null());
  }
  json too_long = post_json(port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 600}}, 400);
  EXPECT_NE(too_long["error"]["message"].get<std::string>().find(
                "maximum context length is 512 tokens. However, you requested 603 tokens (3 in the prompt, 600 in the completion)"),
            std::string::npos)
      << too_long.dump();
  json unknown = post_json(port(), "/v1/completions", {{"prompt", "x"}, {"model", "gpt-4o"}}, 404);
  EXPECT_EQ(unknown["error"]["message"], "The model `gpt-4o` does not exist.");

  streamer.join();
  ASSERT_EQ(concurrent.status, 200) << concurrent.error_body;
  EXPECT_TRUE(concurrent.done);
  EXPECT_EQ(concurrent.text, alone["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(concurrent.finish_reason, alone["choices"][0]["finish_reason"].get<std::string>());
}

// The real server parses bodies on its preprocessing threads: a body that
// is not declared application/json is refused there too (vLLM's 400), and a
// charset parameter is fine.
TEST_F(ServeStories, NonJsonContentTypeIs400) {
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 2})";
  for (const std::string type : {"text/plain", "application/x-www-form-urlencoded", ""}) {
    HttpClient c(port());
    c.send(boost::beast::http::verb::post, "/v1/completions", body, {{"Content-Type", type}});
    HttpResponse r = c.read_response();
    EXPECT_EQ(r.status, 400) << type << ": " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["message"],
              "Unsupported Media Type: Only 'application/json' is allowed")
        << type;
  }
  HttpClient c(port());
  c.send(boost::beast::http::verb::post, "/v1/completions", body,
         {{"Content-Type", "application/json; charset=utf-8"}});
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(ServeStories, ModelsHealthVersion) {
  HttpClient c(port());
  HttpResponse h = c.get("/health");
  EXPECT_EQ(h.status, 200);
  json m = json::parse(c.get("/v1/models").body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["max_model_len"], 512);
  // The listed name is accepted as `model`.
  json r = post_json(port(), "/v1/completions", {{"model", m["data"][0]["id"]}, {"prompt", "Hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r["model"], m["data"][0]["id"]);
  EXPECT_EQ(json::parse(c.get("/version").body)["version"], PAGODA_VERSION);
}

class ServeChat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Trusting request templates (RequestTemplateKwargsIdAndContinuation).
    server_ = new PagodaServer({std::string(PAGODA_SOURCE_DIR) + "/models/stories260K",
                                "--served-model-name", "stories", "--chat-template",
                                shared_path("chat_templates/llama-2-chat.jinja"),
                                "--trust-request-chat-template"});
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }
  static PagodaServer* server_;
};
PagodaServer* ServeChat::server_ = nullptr;

TEST_F(ServeChat, ChatCompletionWithTemplateStreamedAndNot) {
  json body = {{"model", "stories"},
               {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 40},
               {"temperature", 0},
               {"return_token_ids", true}};
  json r = post_json(server_->port(), "/v1/chat/completions", body);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r["model"], "stories");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["usage"]["completion_tokens"], 40);
  // The template writes "<s>[INST] Tell me a story [/INST]": exactly one BOS
  // id, first (its text became the id; no second BOS was added).
  auto prompt_ids = r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(prompt_ids.empty());
  EXPECT_EQ(prompt_ids[0], 1);
  EXPECT_EQ(std::count(prompt_ids.begin(), prompt_ids.end(), 1), 1);
  auto tok = load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  EXPECT_EQ(tok->decode(prompt_ids, true), "[INST] Tell me a story [/INST]");

  StreamResult s = stream_request(server_->port(), "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_EQ(s.role, "assistant");
  EXPECT_EQ(s.text, r["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_TRUE(s.done);

  // stream_options.continuous_usage_stats: the role chunk has 0 completion
  // tokens, every later chunk the tokens streamed so far.
  json cont = body;
  cont["stream"] = true;
  cont["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  HttpClient c(server_->port());
  HttpResponse cr = c.post("/v1/chat/completions", cont.dump());
  std::vector<int64_t> streamed =
      check_continuous_usage(cr, {static_cast<int64_t>(r["choices"][0]["prompt_token_ids"].size())});
  EXPECT_EQ(streamed, std::vector<int64_t>{40});
  json role_chunk = json::parse(sse_payloads(cr.body).at(0));
  EXPECT_EQ(role_chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(role_chunk["usage"]["completion_tokens"], 0);

  // The template's own error (roles must alternate) is a 400 with its text.
  json bad = post_json(server_->port(), "/v1/chat/completions",
                       {{"messages", {{{"role", "assistant"}, {"content", "Hi"}}}}}, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("Conversation roles must alternate"), std::string::npos)
      << bad.dump();
}

// vLLM's per-request chat fields on the real template engine: the request's
// own chat_template with chat_template_kwargs, request_id naming the
// response, continue_final_message ending the prompt inside the assistant's
// turn, and a field not supported yet refused with its name.
TEST_F(ServeChat, RequestTemplateKwargsIdAndContinuation) {
  auto tok = load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  json own = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
              {"chat_template",
               "{% for m in messages %}{{ m['content'] }}{% if shout %}!{% endif %}{% endfor %}"},
              {"chat_template_kwargs", {{"shout", true}}},
              {"request_id", "story-7"},
              {"max_tokens", 2},
              {"return_token_ids", true}};
  json r = post_json(server_->port(), "/v1/chat/completions", own);
  EXPECT_EQ(r["id"], "chatcmpl-story-7");
  EXPECT_EQ(tok->decode(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), true),
            "Once upon a time!");

  json cont = {{"messages",
                {{{"role", "user"}, {"content", "Tell me a story"}},
                 {{"role", "assistant"}, {"content", "Once upon"}}}},
               {"add_generation_prompt", false},
               {"continue_final_message", true},
               {"max_tokens", 2},
               {"return_token_ids", true}};
  json c = post_json(server_->port(), "/v1/chat/completions", cont);
  // llama-2-chat closes the assistant turn with " </s>"; continued, it ends
  // inside the message.
  EXPECT_EQ(tok->decode(c["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), true),
            "[INST] Tell me a story [/INST] Once upon");

  json bad = post_json(
      server_->port(), "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"guided_regex", "[a-z"}}, 400);
  EXPECT_EQ(bad["error"]["param"], "guided_regex");
  EXPECT_EQ(bad["error"]["message"],
            "invalid guided_regex: invalid regex at offset 4: unterminated character class");
}

// Chat echo (vLLM's ChatCompletionRequest.echo): the answer starts with the
// last message's content when that message has the answer's role, which is
// "assistant" with add_generation_prompt, else the last message's own role
// (vLLM's get_chat_request_role). Streamed, the first content delta holds it.
TEST_F(ServeChat, EchoPrependsTheLastMessageOfTheAnswersRole) {
  json cont = {{"messages",
                {{{"role", "user"}, {"content", "Tell me a story"}},
                 {{"role", "assistant"}, {"content", "Once upon"}}}},
               {"add_generation_prompt", false},
               {"continue_final_message", true},
               {"max_tokens", 3},
               {"temperature", 0}};
  json plain = post_json(server_->port(), "/v1/chat/completions", cont);
  const std::string generated = plain["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_FALSE(generated.empty());
  cont["echo"] = true;
  json r = post_json(server_->port(), "/v1/chat/completions", cont);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Once upon" + generated);
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
  StreamResult s = stream_request(server_->port(), "/v1/chat/completions", cont);
  ASSERT_EQ(s.status, 200) << s.error_body;
  EXPECT_EQ(s.text, "Once upon" + generated);

  // The last message is the user's and the answer the assistant's: nothing
  // to echo. Without a generation prompt the answer takes the user's role.
  json user = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 2},
               {"temperature", 0},
               {"echo", true}};
  json u = post_json(server_->port(), "/v1/chat/completions", user);
  EXPECT_EQ(u["choices"][0]["message"]["content"].get<std::string>().find("Tell me"),
            std::string::npos);
  user["add_generation_prompt"] = false;
  json same_role = post_json(server_->port(), "/v1/chat/completions", user);
  EXPECT_EQ(same_role["choices"][0]["message"]["role"], "user");
  EXPECT_EQ(
      same_role["choices"][0]["message"]["content"].get<std::string>().rfind("Tell me a story", 0),
      0u);
}

}  // namespace
}  // namespace pagoda::testing_http
