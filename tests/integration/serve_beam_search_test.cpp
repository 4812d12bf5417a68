// use_beam_search over HTTP on the bundled stories260K: /v1/completions
// with HF transformers' beams (tests/data/beam_search_reference.json, the
// stories260K cases: the returned token ids, in order, with finish_reason
// "stop" and stop_reason for a beam ended by a stop_token_id), streamed (each
// choice one chunk) and /v1/chat/completions, and vLLM's 400s.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeBeamSearch : public BundledServerSuite<ServeBeamSearch> {
 public:
  // ChatGivesNBeams brings its own chat template.
  static std::vector<std::string> server_args() { return {"--trust-request-chat-template"}; }
};

json reference_cases() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/beam_search_reference.json");
  return json::parse(in)["cases"];
}

TEST_F(ServeBeamSearch, CompletionsGiveTransformersBeams) {
  int checked = 0;
  for (const json& c : reference_cases()) {
    if (c["model"] != "stories260K") continue;
    // The model's eos (2) ends beams by itself; the case's other eos id is
    // a stop_token_id.
    json stop = json::array();
    for (const json& id : c["eos_token_ids"])
      if (id != 2) stop.push_back(id);
    const json body = {{"prompt", c["prompt_ids"]},
                       {"max_tokens", c["max_new_tokens"]},
                       {"temperature", 0},
                       {"use_beam_search", true},
                       {"n", c["num_beams"]},
                       {"length_penalty", c["length_penalty"]},
                       {"early_stopping", c["early_stopping"]},
                       {"stop_token_ids", stop},
                       {"return_token_ids", true}};
    SCOPED_TRACE(body.dump());
    const json r = post_json(port(), "/v1/completions", body);
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    ASSERT_EQ(r["choices"].size(), c["beams"].size());
    int64_t completion_tokens = 0;
    for (size_t b = 0; b < r["choices"].size(); ++b) {
      const json& ch = r["choices"][b];
      const json& want = c["beams"][b]["token_ids"];
      EXPECT_EQ(ch["index"], b);
      EXPECT_EQ(ch["token_ids"], want) << "beam " << b;
      const bool ended = std::find(stop.begin(), stop.end(), want.back()) != stop.end();
      EXPECT_EQ(ch["finish_reason"], ended || want.back() == 2 ? "stop" : "length") << "beam " << b;
      if (ended) {
        EXPECT_EQ(ch["stop_reason"], want.back());
      }
      completion_tokens += static_cast<int64_t>(want.size());
    }
    EXPECT_EQ(r["usage"]["completion_tokens"], completion_tokens);
    EXPECT_EQ(r["usage"]["prompt_tokens"], c["prompt_ids"].size());
    ++checked;
  }
  EXPECT_EQ(checked, 18);
}

TEST_F(ServeBeamSearch, StreamedEachBeamIsOneChunk) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0},
                     {"use_beam_search", true},      {"n", 3},          {"stream", true}};
  const json whole = post_json(port(), "/v1/completions", [&] {
    json b = body;
    b["stream"] = false;
    return b;
  }());
  HttpClient client(port());
  const HttpResponse resp = client.post("/v1/completions", body.dump());
  ASSERT_EQ(resp.status, 200) << resp.body;
  std::vector<std::string> texts(3);
  int chunks = 0;
  for (const std::string& e : sse_payloads(resp.body)) {
    if (e == "[DONE]") continue;
    const json event = json::parse(e);
    for (const json& ch : event["choices"]) {
      texts[ch["index"].get<size_t>()] += ch["text"].get<std::string>();
      ++chunks;
    }
  }
  EXPECT_EQ(chunks, 3);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(texts[i], whole["choices"][i]["text"].get<std::string>()) << i;
}

// One beam is greedy search, so its output is the greedy sample's: the same
// tokens, ended by the stop token id, and the same text, the stop token's
// text ("." here) left out unless include_stop_str_in_output, as sampling.
TEST_F(ServeBeamSearch, StopTokenTextFollowsTheSamplingRule) {
  for (const bool include : {false, true}) {
    SCOPED_TRACE(include ? "include_stop_str_in_output" : "stop text dropped");
    const json body = {{"prompt", "Once upon a time"},
                       {"max_tokens", 40},
                       {"temperature", 0},
                       {"stop_token_ids", {426}},
                       {"include_stop_str_in_output", include},
                       {"return_token_ids", true}};
    const json sampled = post_json(port(), "/v1/completions", body);
    json beam_body = body;
    beam_body["use_beam_search"] = true;
    const json beam = post_json(port(), "/v1/completions", beam_body);
    const json& s = sampled["choices"][0];
    const json& b = beam["choices"][0];
    ASSERT_EQ(s["stop_reason"], 426) << sampled.dump();
    EXPECT_EQ(b["stop_reason"], 426) << beam.dump();
    EXPECT_EQ(b["finish_reason"], "stop");
    EXPECT_EQ(b["token_ids"], s["token_ids"]);
    EXPECT_EQ(b["text"], s["text"]);
    const std::string text = b["text"].get<std::string>();
    EXPECT_EQ(!text.empty() && text.back() == '.', include) << text;
  }
}

TEST_F(ServeBeamSearch, ChatGivesNBeams) {
  const json r = post_json(port(), "/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                            {"chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"},
                            {"max_tokens", 5},
                            {"temperature", 0},
                            {"use_beam_search", true},
                            {"n", 2}});
  ASSERT_EQ(r["choices"].size(), 2u) << r.dump();
  EXPECT_NE(r["choices"][0]["message"]["content"], r["choices"][1]["message"]["content"]);
}

TEST_F(ServeBeamSearch, RefusesWhatVllmRefuses) {
  const auto error_param = [&](const json& body) {
    const json r = post_json(port(), "/v1/completions", body, 400);
    EXPECT_EQ(r["error"]["code"], 400) << r.dump();
    return r["error"]["param"];
  };
  EXPECT_EQ(error_param({{"prompt", "Hi"}, {"use_beam_search", true}, {"n", 2}}), "temperature");
  EXPECT_EQ(error_param(
                {{"prompt", "Hi"}, {"use_beam_search", true}, {"temperature", 0}, {"top_p", 0.5}}),
            "top_p");
  EXPECT_EQ(error_param({{"prompt", "Hi"}, {"length_penalty", 0.5}}), "length_penalty");
  EXPECT_EQ(error_param({{"prompt", "Hi"}, {"early_stopping", true}}), "early_stopping");
  EXPECT_EQ(error_param(
                {{"prompt", "Hi"}, {"use_beam_search", true}, {"temperature", 0}, {"logprobs", 1}}),
            "logprobs");
  EXPECT_EQ(
      error_param({{"prompt", "Hi"}, {"use_beam_search", true}, {"temperature", 0}, {"stop", "x"}}),
      "stop");
  EXPECT_EQ(error_param({{"prompt", "Hi"},
                         {"use_beam_search", true},
                         {"temperature", 0},
                         {"early_stopping", "later"}}),
            "early_stopping");
}

// Each step asks for 2 x the beam width next-token candidates, as top
// logprobs bounded by max_logprobs (20): 11 beams are a 400 naming the
// field, before a stream starts (they used to fail late: "logprobs must be
// in [0, 20]", param null, after a 200 when streamed).
TEST_F(ServeBeamSearch, BeamWidthBeyondMaxLogprobsIsA400BeforeTheStream) {
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    const json body = {{"prompt", "Hi"}, {"use_beam_search", true}, {"temperature", 0},
                       {"n", 11},        {"max_tokens", 4},         {"stream", stream}};
    HttpClient client(port());
    const HttpResponse resp = client.post("/v1/completions", body.dump());
    ASSERT_EQ(resp.status, 400) << resp.body;
    const json e = json::parse(resp.body)["error"];
    EXPECT_EQ(e["param"], "n");
    EXPECT_NE(e["message"].get<std::string>().find("at most 10 beams"), std::string::npos)
        << e.dump();
  }
  const json r = post_json(
      port(), "/v1/completions",
      {{"prompt", "Hi"}, {"use_beam_search", true}, {"temperature", 0}, {"n", 2}, {"best_of", 11}},
      400);
  EXPECT_EQ(r["error"]["param"], "best_of");
  const json ten = post_json(port(), "/v1/completions",
                             {{"prompt", "Hi"},
                              {"use_beam_search", true},
                              {"temperature", 0},
                              {"n", 10},
                              {"max_tokens", 2}});
  EXPECT_EQ(ten["choices"].size(), 10u) << ten.dump();
}

}  // namespace
}  // namespace pagoda::testing_http
