// Prompt logprobs over HTTP on the bundled stories260K: completions'
// `prompt_logprobs` list (vLLM's shape), and `echo` with `logprobs`
// (non-streamed and streamed) whose prompt entries equal that list's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServePromptLogprobs : public BundledServerSuite<ServePromptLogprobs> {};

// "Once upon a time" is <s> + 4 tokens; greedy continues it with " there".
const json kPrompt = "Once upon a time, there was";

TEST_F(ServePromptLogprobs, CompletionsChoiceCarriesVllmsList) {
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", kPrompt},
                      {"max_tokens", 2},
                      {"temperature", 0},
                      {"prompt_logprobs", 2},
                      {"return_token_ids", true}});
  const int64_t n = r["usage"]["prompt_tokens"].get<int64_t>();
  ASSERT_GE(n, 6);
  const json& plp = r["choices"][0]["prompt_logprobs"];
  ASSERT_TRUE(plp.is_array()) << r.dump();
  ASSERT_EQ(static_cast<int64_t>(plp.size()), n);
  EXPECT_TRUE(plp[0].is_null());
  for (size_t i = 1; i < plp.size(); ++i) {
    // The prompt token plus the top 2 (2 entries when it is one of them).
    ASSERT_TRUE(plp[i].is_object());
    EXPECT_TRUE(plp[i].size() == 2 || plp[i].size() == 3) << plp[i].dump();
    bool has_rank1 = false;
    for (const auto& [id, e] : plp[i].items()) {
      EXPECT_LE(e["logprob"].get<double>(), 0.0);
      EXPECT_GE(e["rank"].get<int64_t>(), 1);
      EXPECT_TRUE(e["decoded_token"].is_string());
      has_rank1 = has_rank1 || e["rank"] == 1;
    }
    EXPECT_TRUE(has_rank1) << plp[i].dump();
  }
  // Each position holds its prompt token, and their decoded_token strings
  // join into the prompt with SentencePiece's leading space restored
  // (vLLM's convert_ids_list_to_tokens).
  const json& ids = r["choices"][0]["prompt_token_ids"];
  ASSERT_EQ(ids.size(), plp.size());
  std::string joined;
  for (size_t i = 1; i < plp.size(); ++i) {
    const std::string key = std::to_string(ids[i].get<int32_t>());
    ASSERT_TRUE(plp[i].contains(key)) << i << ": " << plp[i].dump();
    joined += plp[i][key]["decoded_token"].get<std::string>();
  }
  ASSERT_FALSE(joined.empty());
  EXPECT_EQ(joined.front(), ' ');
  EXPECT_EQ(joined.substr(1), kPrompt.get<std::string>());
  // Not asked for: absent.
  json plain = post_json(port(), "/v1/completions",
                         {{"prompt", kPrompt}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_FALSE(plain["choices"][0].contains("prompt_logprobs"));
}

TEST_F(ServePromptLogprobs, EchoWithLogprobsStartsWithThePromptsEntries) {
  json list = post_json(
      port(), "/v1/completions",
      {{"prompt", kPrompt}, {"max_tokens", 3}, {"temperature", 0}, {"prompt_logprobs", 1}});
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", kPrompt},
                      {"max_tokens", 3},
                      {"temperature", 0},
                      {"echo", true},
                      {"logprobs", 1}});
  const json& c = r["choices"][0];
  EXPECT_EQ(c["text"].get<std::string>().rfind(kPrompt.get<std::string>(), 0), 0u) << c["text"];
  EXPECT_EQ(c["text"], kPrompt.get<std::string>() + list["choices"][0]["text"].get<std::string>());
  const json& lp = c["logprobs"];
  const json& plp = list["choices"][0]["prompt_logprobs"];
  const size_t n = plp.size();
  ASSERT_EQ(lp["tokens"].size(), n + 3);
  ASSERT_EQ(lp["token_logprobs"].size(), n + 3);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < n; ++i) {
    // The prompt token's entry: the one whose rank is not from the top list
    // unless it is itself top-1; its logprob equals token_logprobs[i].
    const double got = lp["token_logprobs"][i].get<double>();
    bool found = false;
    for (const auto& [id, e] : plp[i].items())
      found = found || std::abs(e["logprob"].get<double>() - got) < 1e-6;
    EXPECT_TRUE(found) << i << ": " << got << " not in " << plp[i].dump();
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
  }
  // The completion's entries follow.
  for (size_t i = n; i < n + 3; ++i) EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
  // text_offset never decreases and starts at 0.
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 1; i < n + 3; ++i) EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]);

  // Streamed: the same object, split over the chunks.
  HttpClient client(port());
  HttpResponse s = client.post("/v1/completions", json{{"prompt", kPrompt},
                                                       {"max_tokens", 3},
                                                       {"temperature", 0},
                                                       {"echo", true},
                                                       {"logprobs", 1},
                                                       {"stream", true}}
                                                      .dump());
  ASSERT_EQ(s.status, 200) << s.body;
  json joined = {
      {"tokens", json::array()}, {"token_logprobs", json::array()}, {"text_offset", json::array()}};
  std::string text;
  for (const std::string& e : sse_payloads(s.body)) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    if (j["choices"].empty()) continue;
    text += j["choices"][0]["text"].get<std::string>();
    const json& l = j["choices"][0]["logprobs"];
    if (l.is_null()) continue;
    for (const char* k : {"tokens", "token_logprobs", "text_offset"})
      for (const json& v : l[k]) joined[k].push_back(v);
  }
  EXPECT_EQ(text, c["text"].get<std::string>());
  EXPECT_EQ(joined["tokens"], lp["tokens"]);
  EXPECT_EQ(joined["text_offset"], lp["text_offset"]);
  ASSERT_EQ(joined["token_logprobs"].size(), lp["token_logprobs"].size());
  EXPECT_TRUE(joined["token_logprobs"][0].is_null());
  for (size_t i = 1; i < n + 3; ++i)
    EXPECT_NEAR(joined["token_logprobs"][i].get<double>(), lp["token_logprobs"][i].get<double>(),
                1e-6)
        << i;
}

// Echo with max_tokens 0 (OpenAI's legacy API; vLLM's
// echo_without_generation, how lm-eval-harness scores a text): each choice
// is its prompt alone, with the prompt's logprobs; the one token the engine
// ran is not shown, and usage counts it as vLLM's does. Without echo, 0 is
// SamplingParams' 400.
TEST_F(ServePromptLogprobs, EchoWithMaxTokensZeroIsThePromptAlone) {
  json list = post_json(port(), "/v1/completions",
                        {{"prompt", kPrompt}, {"max_tokens", 1}, {"prompt_logprobs", 1}});
  const json& plp = list["choices"][0]["prompt_logprobs"];
  json r = post_json(port(), "/v1/completions",
                     {{"prompt", json::array({kPrompt, "Lily"})},
                      {"max_tokens", 0},
                      {"echo", true},
                      {"logprobs", 1}});
  ASSERT_EQ(r["choices"].size(), 2u) << r.dump();
  const json& c = r["choices"][0];
  EXPECT_EQ(c["text"], kPrompt);
  EXPECT_EQ(r["choices"][1]["text"], "Lily");
  EXPECT_EQ(c["finish_reason"], "length");
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), plp.size()) << lp.dump();
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  for (size_t i = 1; i < plp.size(); ++i) {
    bool found = false;
    for (const auto& [id, e] : plp[i].items())
      found = found ||
              std::abs(e["logprob"].get<double>() - lp["token_logprobs"][i].get<double>()) < 1e-6;
    EXPECT_TRUE(found) << i << ": " << lp["token_logprobs"][i] << " not in " << plp[i].dump();
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 2);  // one engine token per prompt
  // Streamed: the prompt in one chunk per choice, nothing after it.
  HttpClient client(port());
  HttpResponse s = client.post(
      "/v1/completions",
      json{{"prompt", kPrompt}, {"max_tokens", 0}, {"echo", true}, {"stream", true}}.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  std::string text;
  for (const std::string& e : sse_payloads(s.body))
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, kPrompt.get<std::string>());
  // Without echo: vLLM's SamplingParams error.
  HttpResponse bad =
      client.post("/v1/completions", json{{"prompt", kPrompt}, {"max_tokens", 0}}.dump());
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(json::parse(bad.body)["error"]["message"], "max_tokens must be at least 1, got 0.");
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "max_tokens");
}

// The values of an object, in the order its text lists them.
std::vector<double> logprobs_in_text_order(const nlohmann::ordered_json& o, bool nested) {
  std::vector<double> v;
  for (auto it = o.begin(); it != o.end(); ++it)
    v.push_back(nested ? it.value()["logprob"].get<double>() : it.value().get<double>());
  return v;
}

bool most_likely_first(const std::vector<double>& v) {
  return std::is_sorted(v.begin(), v.end(), std::greater<>());
}

// Top logprobs come most likely first, as OpenAI's and vLLM's: each
// completions top_logprobs object (non-streamed and streamed) and each
// prompt_logprobs entry, read in the order the response text has them
// (they came sorted by token text / id string). Sampled, so some sampled
// tokens are outside the top 5 and come last.
TEST_F(ServePromptLogprobs, TopLogprobsComeMostLikelyFirst) {
  const json body = {{"prompt", kPrompt}, {"max_tokens", 12},     {"temperature", 1.0}, {"seed", 3},
                     {"logprobs", 5},     {"prompt_logprobs", 5}, {"ignore_eos", true}};
  HttpResponse r = HttpClient(port()).post("/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(r.body);
  const nlohmann::ordered_json& top = j["choices"][0]["logprobs"]["top_logprobs"];
  ASSERT_EQ(top.size(), 12u);
  for (const nlohmann::ordered_json& t : top)
    EXPECT_TRUE(most_likely_first(logprobs_in_text_order(t, false))) << t.dump();
  const nlohmann::ordered_json& plp = j["choices"][0]["prompt_logprobs"];
  for (size_t i = 1; i < plp.size(); ++i)
    EXPECT_TRUE(most_likely_first(logprobs_in_text_order(plp[i], true))) << plp[i].dump();
  // Streamed (without prompt_logprobs, which vLLM refuses with stream).
  json streamed = body;
  streamed.erase("prompt_logprobs");
  streamed["stream"] = true;
  HttpResponse s = HttpClient(port()).post("/v1/completions", streamed.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  size_t positions = 0;
  for (const std::string& e : sse_payloads(s.body)) {
    if (e == "[DONE]") continue;
    const nlohmann::ordered_json c = nlohmann::ordered_json::parse(e);
    if (c["choices"].empty() || c["choices"][0]["logprobs"].is_null()) continue;
    for (const nlohmann::ordered_json& t : c["choices"][0]["logprobs"]["top_logprobs"]) {
      EXPECT_TRUE(most_likely_first(logprobs_in_text_order(t, false))) << t.dump();
      ++positions;
    }
  }
  EXPECT_EQ(positions, 12u);
}

TEST_F(ServePromptLogprobs, StreamWithPromptLogprobsIsA400) {
  HttpClient client(port());
  HttpResponse r =
      client.post("/v1/completions",
                  json{{"prompt", kPrompt}, {"prompt_logprobs", 1}, {"stream", true}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "prompt_logprobs");
}

}  // namespace
}  // namespace pagoda::testing_http
