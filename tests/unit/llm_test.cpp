// server/llm.h: vLLM's LLM class on the bundled stories260K (CPU): the
// greedy reference (shared/testvectors/stories260K_greedy.json, llama2.c's
// run.c), prompt forms, per-prompt SamplingParams, the RequestOutput shape,
// and errors from the server's validation.
#include "server/llm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace pagoda::offline {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One model for the suite (loading is cheap, but each LLM owns an engine).
class LLMTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineArgs args;
    args.device = "cpu";
    llm_ = new LLM(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", args);
  }
  static void TearDownTestSuite() {
    delete llm_;
    llm_ = nullptr;
  }
  static LLM* llm_;
};
LLM* LLMTest::llm_ = nullptr;

TEST_F(LLMTest, TextAndTokenPromptsReproduceTheGreedyReference) {
  const json ref =
      read_json(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (const json& c : ref["cases"]) {
    prompts.emplace_back(c["prompt"].get<std::string>());
    prompts.emplace_back(c["prompt_ids"].get<std::vector<int32_t>>());
    for (int k = 0; k < 2; ++k)
      params.emplace_back(json{{"temperature", 0}, {"max_tokens", c["greedy_ids"].size()}});
  }
  const std::vector<RequestOutput> outs = llm_->generate(prompts, params, /*use_tqdm=*/false);
  ASSERT_EQ(outs.size(), prompts.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const json& c = ref["cases"][i / 2];
    SCOPED_TRACE(fmt::format("case {} ({})", c["prompt"].dump(), i % 2 ? "token ids" : "text"));
    EXPECT_EQ(outs[i].prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
    ASSERT_EQ(outs[i].outputs.size(), 1u);
    EXPECT_EQ(outs[i].outputs[0].token_ids, c["greedy_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(outs[i].outputs[0].finish_reason, "length");
    EXPECT_TRUE(outs[i].finished);
    EXPECT_FALSE(outs[i].outputs[0].cumulative_logprob);  // no logprobs asked (vLLM v1)
    // Text and token-id prompts give the same completion text.
    if (i % 2) {
      EXPECT_EQ(outs[i].outputs[0].text, outs[i - 1].outputs[0].text);
    }
  }
  // Outputs in prompt order; request ids count this LLM's requests.
  EXPECT_EQ(outs[0].prompt, "");
  EXPECT_FALSE(outs[1].prompt);  // a TokensPrompt has no text (vLLM v1: None)
  EXPECT_EQ(outs[2].prompt, "Once upon a time");
  EXPECT_EQ(std::stoll(outs[1].request_id), std::stoll(outs[0].request_id) + 1);
}

TEST_F(LLMTest, TheGreedyTextIsRunCs) {
  // llama2.c's text of the whole greedy run after "Once upon a time".
  std::string t = read_text(std::string(PAGODA_SHARED_DIR) +
                            "/testvectors/stories260K_runc_greedy_once_upon_a_time.txt");
  const std::string prefix = "Once upon a time";
  ASSERT_EQ(t.rfind(prefix, 0), 0u);
  auto outs = llm_->generate({"Once upon a time"},
                             SamplingParams(json{{"temperature", 0}, {"max_tokens", 40}}), false);
  const std::string text = outs[0].outputs[0].text;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(t.substr(prefix.size(), text.size()), text);
}

TEST_F(LLMTest, OneSamplingParamsForAllAndSeedsReplay) {
  SamplingParams sp({{"temperature", 0.8}, {"top_p", 0.95}, {"seed", 7}, {"max_tokens", 12}});
  auto a = llm_->generate({"Once upon a time", "The little dog"}, sp, false);
  auto b = llm_->generate({"Once upon a time", "The little dog"}, sp, false);
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(a[i].outputs[0].token_ids, b[i].outputs[0].token_ids);
  EXPECT_EQ(a[1].prompt, "The little dog");
}

TEST_F(LLMTest, LogprobsNAndStopInVllmsShape) {
  // n > 1 samples (greedy takes n 1, as vLLM's SamplingParams).
  SamplingParams sampled(
      {{"temperature", 0.8}, {"seed", 7}, {"max_tokens", 6}, {"logprobs", 2}, {"n", 2}});
  auto several = llm_->generate({"Once upon a time"}, sampled, false);
  ASSERT_EQ(several[0].outputs.size(), 2u);
  EXPECT_EQ(several[0].outputs[1].index, 1);
  for (const CompletionOutput& c : several[0].outputs) {
    ASSERT_TRUE(c.logprobs);
    EXPECT_EQ(c.logprobs->size(), c.token_ids.size());
  }
  SamplingParams sp(
      {{"temperature", 0}, {"max_tokens", 6}, {"logprobs", 2}, {"prompt_logprobs", 1}});
  auto outs = llm_->generate({"Once upon a time"}, sp, false);
  const RequestOutput& o = outs[0];
  const CompletionOutput& c = o.outputs[0];
  ASSERT_TRUE(c.logprobs);
  ASSERT_EQ(c.logprobs->size(), c.token_ids.size());
  double sum = 0;
  for (size_t i = 0; i < c.token_ids.size(); ++i) {
    const PositionLogprobs& p = (*c.logprobs)[i];
    ASSERT_TRUE(p.count(c.token_ids[i]));
    EXPECT_GE(p.size(), 2u);  // the top 2 (the greedy token among them)
    EXPECT_LE(p.size(), 3u);
    // Greedy on raw logits: the sampled token is the most likely.
    EXPECT_EQ(p.at(c.token_ids[i]).rank, 1);
    sum += p.at(c.token_ids[i]).logprob;
  }
  ASSERT_TRUE(c.cumulative_logprob);
  EXPECT_NEAR(*c.cumulative_logprob, sum, 1e-3);
  ASSERT_TRUE(o.prompt_logprobs);
  ASSERT_EQ(o.prompt_logprobs->size(), o.prompt_token_ids.size());
  EXPECT_FALSE((*o.prompt_logprobs)[0]);  // vLLM's leading None
  EXPECT_TRUE((*o.prompt_logprobs)[1]->count(o.prompt_token_ids[1]));

  // A stop string: finish_reason "stop", stop_reason the string.
  const std::string text = c.text;
  const std::string stop = text.substr(text.size() / 2, 2);
  auto stopped = llm_->generate(
      {"Once upon a time"},
      SamplingParams(json{{"temperature", 0}, {"max_tokens", 6}, {"stop", stop}}), false);
  EXPECT_EQ(stopped[0].outputs[0].finish_reason, "stop");
  EXPECT_EQ(stopped[0].outputs[0].stop_reason, stop);

  // The JSON form keeps vLLM's names.
  const json j = to_json(o);
  for (const char* k : {"request_id", "prompt", "prompt_token_ids", "prompt_logprobs", "outputs",
                        "finished", "num_cached_tokens"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"index", "text", "token_ids", "cumulative_logprob", "logprobs",
                        "finish_reason", "stop_reason"})
    EXPECT_TRUE(j["outputs"][0].contains(k)) << k;
  EXPECT_TRUE(j["prompt_logprobs"][0].is_null());
  const json& first = j["outputs"][0]["logprobs"][0][fmt::format("{}", c.token_ids[0])];
  EXPECT_EQ(first["rank"], 1);
  EXPECT_TRUE(first["decoded_token"].is_string());
}

// A sampled token outside the top k still carries its rank (vLLM reports
// it with logprobs=0 too): the 5th most likely first token (from a
// logprobs=20 run) forced by logit_bias under greedy has rank 5.
TEST_F(LLMTest, SampledTokenOutsideTheTopKHasItsRank) {
  const auto ref = llm_->generate(
      {"Once upon a time"},
      SamplingParams(json{{"temperature", 0}, {"max_tokens", 1}, {"logprobs", 20}}), false);
  const PositionLogprobs& all = (*ref[0].outputs[0].logprobs)[0];
  int32_t fifth = -1;
  for (const auto& [id, lp] : all)
    if (lp.rank && *lp.rank == 5) fifth = id;
  ASSERT_GE(fifth, 0);
  for (const auto& [id, lp] : all)  // no tie with it, so its rank is exactly 5
    if (id != fifth) {
      EXPECT_NE(lp.logprob, all.at(fifth).logprob);
    }
  for (const int k : {0, 1, 4}) {
    SCOPED_TRACE(fmt::format("logprobs {}", k));
    auto outs =
        llm_->generate({"Once upon a time"},
                       SamplingParams(json{{"temperature", 0},
                                           {"max_tokens", 1},
                                           {"logprobs", k},
                                           {"logit_bias", {{fmt::format("{}", fifth), 100}}}}),
                       false);
    const CompletionOutput& c = outs.at(0).outputs.at(0);
    ASSERT_TRUE(c.logprobs);
    ASSERT_EQ(c.token_ids, std::vector<int32_t>{fifth});
    const PositionLogprobs& p = (*c.logprobs)[0];
    EXPECT_EQ(p.size(), static_cast<size_t>(k) + 1);
    ASSERT_TRUE(p.count(fifth));
    ASSERT_TRUE(p.at(fifth).rank);
    EXPECT_EQ(*p.at(fifth).rank, 5);
    EXPECT_NEAR(p.at(fifth).logprob, all.at(fifth).logprob, 1e-6);
  }
}

TEST_F(LLMTest, InvalidRequestsThrowNamingThePromptAndFieldBeforeAnyRuns) {
  std::vector<SamplingParams> params = {SamplingParams(json{{"max_tokens", 2}}),
                                        SamplingParams(json{{"temperature", -1}})};
  try {
    llm_->generate({"Once upon a time", "The little dog"}, params, false);
    FAIL() << "no error";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().index, 1u);
    EXPECT_EQ(e.error().param, "temperature");
    EXPECT_NE(std::string(e.what()).find("prompt 1: temperature must be non-negative"),
              std::string::npos)
        << e.what();
  }
  // vLLM's SamplingParams(**kwargs) refuses an unknown keyword.
  try {
    llm_->generate({"x"}, SamplingParams(json{{"max_token", 3}}), false);
    FAIL() << "no error";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "max_token");
  }
  EXPECT_THROW(llm_->generate({"a", "b"}, std::vector<SamplingParams>{SamplingParams()}, false),
               std::invalid_argument);
  // Too long for the context (stories260K: 512 tokens).
  std::string too_long;
  for (int i = 0; i < 600; ++i) too_long += "dog ";
  EXPECT_THROW(llm_->generate({too_long}, std::nullopt, false), LLMError);
}

TEST_F(LLMTest, MaxTokensPastTheContextStopsAtMaxModelLen) {
  // vLLM's LLM refuses only a prompt that fills the context; a longer
  // max_tokens (or None: null) generates until max_model_len, "length".
  const int64_t max_len = llm_->serving_model().max_model_len;
  auto outs =
      llm_->generate({"Once", "Once"},
                     std::vector<SamplingParams>{
                         SamplingParams(json{{"max_tokens", max_len + 88}, {"ignore_eos", true}}),
                         SamplingParams(json{{"max_tokens", nullptr}, {"ignore_eos", true}})},
                     false);
  for (const RequestOutput& o : outs) {
    EXPECT_EQ(static_cast<int64_t>(o.prompt_token_ids.size() + o.outputs[0].token_ids.size()),
              max_len);
    EXPECT_EQ(o.outputs[0].finish_reason, "length");
  }
  // Left out, max_tokens stays vLLM SamplingParams' 16.
  auto d = llm_->generate({"Once"}, SamplingParams(json{{"ignore_eos", true}}), false);
  EXPECT_EQ(d[0].outputs[0].token_ids.size(), 16u);
}

// vLLM's SamplingParams._verify_args holds min_tokens to max_tokens as
// given; the room the context leaves is not checked (generation stops at
// max_model_len first, "length"). It used to be: a min_tokens above the
// room was refused ("min_tokens must be less than or equal to
// max_tokens=<room>").
TEST(LLMMinTokens, IsCheckedAgainstMaxTokensAsGivenNotTheRoomLeft) {
  EngineArgs args;
  args.device = "cpu";
  args.max_model_len = 32;
  LLM llm(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", args);
  const auto outs = llm.generate(
      {"Once upon a time", "Once upon a time"},
      std::vector<SamplingParams>{
          SamplingParams(json{{"temperature", 0}, {"max_tokens", 40}, {"min_tokens", 30}}),
          SamplingParams(json{{"temperature", 0}, {"max_tokens", nullptr}, {"min_tokens", 100}})},
      false);
  for (const RequestOutput& o : outs) {
    EXPECT_EQ(o.prompt_token_ids.size() + o.outputs[0].token_ids.size(), 32u);
    EXPECT_EQ(o.outputs[0].finish_reason, "length");
  }
  // Above max_tokens as given: still vLLM's error.
  try {
    llm.generate({"Once"}, SamplingParams(json{{"max_tokens", 20}, {"min_tokens", 21}}), false);
    FAIL() << "no error";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "min_tokens");
    EXPECT_NE(std::string(e.what()).find(
                  "min_tokens must be less than or equal to max_tokens=20, got 21."),
              std::string::npos)
        << e.what();
  }
}

// A prompt's cache_salt as vLLM's renderer takes it (`if cache_salt :=
// prompt.get("cache_salt")`): a false value ("" included; it used to be
// refused) is no salt, so the prompt shares the unsalted prompts' cached
// blocks; a true value must be a string.
TEST_F(LLMTest, AFalseCacheSaltIsNoSalt) {
  std::vector<int32_t> ids;
  for (int32_t i = 420; i < 460; ++i) ids.push_back(i);
  auto request = [&](std::optional<json> salt) {
    json r = {{"prompt_token_ids", ids}, {"max_tokens", 2}, {"temperature", 0}};
    if (salt) r["cache_salt"] = *salt;
    return r;
  };
  // One run each: a request finds the blocks of those before it.
  std::vector<Result> r;
  for (const json& req : {request(std::nullopt), request(json("")), request(json(false)),
                          request(json(0)), request(json("delta")), request(json(3))})
    r.push_back(llm_->run({req}, ProgressBar::Mode::kOff).at(0));
  for (size_t i = 0; i < 5; ++i)
    ASSERT_TRUE(r[i].output) << i << ": " << (r[i].error ? r[i].error->message : "");
  EXPECT_EQ(r[0].output->num_cached_tokens, 0);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(r[i].output->num_cached_tokens, 39) << i;
    EXPECT_EQ(r[i].output->outputs[0].token_ids, r[0].output->outputs[0].token_ids) << i;
  }
  EXPECT_EQ(r[4].output->num_cached_tokens, 0);  // salted: its own blocks
  ASSERT_TRUE(r[5].error);
  EXPECT_EQ(r[5].error->param, "cache_salt");
  EXPECT_NE(r[5].error->message.find("'cache_salt' must be a string"), std::string::npos)
      << r[5].error->message;
}

// vLLM gives a request with detokenize=False no tokenizer: its text is
// empty and every Logprob's decoded_token is None (sampled and prompt
// logprobs); they used to be filled.
TEST_F(LLMTest, DetokenizeFalseLeavesDecodedTokensNone) {
  auto run = [&](bool detokenize) {
    return llm_->generate({"Once upon a time"},
                          SamplingParams(json{{"temperature", 0},
                                              {"max_tokens", 3},
                                              {"logprobs", 2},
                                              {"prompt_logprobs", 1},
                                              {"detokenize", detokenize}}),
                          false)[0];
  };
  const RequestOutput with = run(true), without = run(false);
  EXPECT_EQ(without.outputs[0].token_ids, with.outputs[0].token_ids);
  EXPECT_EQ(without.outputs[0].text, "");
  ASSERT_TRUE(without.outputs[0].logprobs && without.prompt_logprobs);
  size_t entries = 0;
  for (const PositionLogprobs& p : *without.outputs[0].logprobs)
    for (const auto& [id, lp] : p) {
      EXPECT_FALSE(lp.decoded_token) << id;
      ++entries;
    }
  for (const auto& p : *without.prompt_logprobs)
    if (p)
      for (const auto& [id, lp] : *p) {
        EXPECT_FALSE(lp.decoded_token) << id;
        ++entries;
      }
  EXPECT_GE(entries, 6u + 4u);
  const json j = to_json(without);
  for (const auto& [id, e] : j["outputs"][0]["logprobs"][0].items())
    EXPECT_TRUE(e["decoded_token"].is_null()) << id;
  EXPECT_TRUE(j["prompt_logprobs"][1].begin()->at("decoded_token").is_null());
  // With detokenize (the default) they are the tokens' text.
  const json w = to_json(with);
  for (const auto& [id, e] : w["outputs"][0]["logprobs"][0].items())
    EXPECT_TRUE(e["decoded_token"].is_string()) << id;
}

TEST_F(LLMTest, RunReportsEachRequestsErrorAndRunsTheRest) {
  std::vector<nlohmann::ordered_json> requests = {
      {{"prompt", "Once upon a time"}, {"max_tokens", 3}},
      {{"prompt", "x"}, {"top_p", 0}},
      {{"prompt_token_ids", {1, 100000}}},
      {{"prompt", "a"}, {"prompt_token_ids", {1}}}};
  std::vector<Result> r = llm_->run(requests, ProgressBar::Mode::kOff);
  ASSERT_EQ(r.size(), 4u);
  ASSERT_TRUE(r[0].output);
  EXPECT_EQ(r[0].output->outputs[0].token_ids.size(), 3u);
  ASSERT_TRUE(r[1].error);
  EXPECT_EQ(r[1].error->param, "top_p");
  ASSERT_TRUE(r[2].error);
  EXPECT_EQ(r[2].error->param, "prompt_token_ids");
  EXPECT_NE(r[2].error->message.find("out of vocabulary"), std::string::npos);
  ASSERT_TRUE(r[3].error);
  EXPECT_NE(r[3].error->message.find("one of"), std::string::npos);
}

TEST_F(LLMTest, ChatUsesTheTemplateOrSaysThereIsNone) {
  const json conversation = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  try {
    llm_->chat({conversation}, SamplingParams(json{{"max_tokens", 4}}), json::object(), false);
    FAIL() << "stories260K has no chat template";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "messages");
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  const std::string tmpl =
      read_text(std::string(PAGODA_SHARED_DIR) + "/chat_templates/llama-2-chat.jinja");
  auto outs = llm_->chat({conversation, conversation},
                         SamplingParams(json{{"max_tokens", 4}, {"temperature", 0}}),
                         {{"chat_template", tmpl}}, false);
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_TRUE(outs[0].prompt);
  EXPECT_NE(outs[0].prompt->find("[INST]"), std::string::npos) << *outs[0].prompt;
  EXPECT_EQ(outs[0].prompt_token_ids.front(), 1);  // the template's BOS, once
  EXPECT_NE(outs[0].prompt_token_ids[1], 1);
  EXPECT_EQ(outs[0].outputs[0].token_ids, outs[1].outputs[0].token_ids);
}

// LLM.chat's tools reach the template as given, and every object's keys in
// the order they were written (tests/data/offline_tools_reference.json:
// Jinja2's renderings of the Qwen2.5 template, the tiny Qwen2 chat model's
// own, with keys out of sorted order).
TEST(LLMChatTools, ToolsAndArgumentsReachTheTemplateInKeyOrder) {
  const nlohmann::ordered_json ref = nlohmann::ordered_json::parse(
      read_text(std::string(PAGODA_SOURCE_DIR) + "/tests/data/offline_tools_reference.json"));
  ASSERT_EQ(ref["cases"].size(), 3u);
  EngineArgs args;
  args.device = "cpu";
  LLM llm(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat", args);
  const SamplingParams one(json{{"temperature", 0}, {"max_tokens", 1}});
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<RequestOutput> out =
        llm.generate({Prompt::chat(c["messages"], {{"tools", c["tools"]}})}, one, false);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].prompt, c["rendered"].get<std::string>());
  }
  // The same chat with its keys sorted (a nlohmann::json) renders other text:
  // the order is what the test checks.
  const auto& c = ref["cases"][0];
  const json sorted_tools = c["tools"];
  std::vector<RequestOutput> out = llm.generate(
      {Prompt::chat(c["messages"], {{"tools", nlohmann::ordered_json(sorted_tools)}})}, one, false);
  EXPECT_NE(out[0].prompt, c["rendered"].get<std::string>());
  // tools on a prompt that is not a chat, or not a list: errors naming it.
  try {
    llm.generate({Prompt::from_json({{"prompt", "Once"}, {"tools", json::array()}})}, one, false);
    ADD_FAILURE() << "tools without messages accepted";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "tools") << e.what();
  }
  try {
    llm.generate({Prompt::chat(c["messages"], {{"tools", "get_weather"}})}, one, false);
    ADD_FAILURE() << "tools as a string accepted";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "tools") << e.what();
  }
  // Each tool must be a dict, as transformers' apply_chat_template checks.
  try {
    llm.generate({Prompt::chat(c["messages"], {{"tools", {"get_weather"}}})}, one, false);
    ADD_FAILURE() << "a tool that is a string accepted";
  } catch (const LLMError& e) {
    EXPECT_EQ(e.error().param, "tools") << e.what();
    EXPECT_NE(e.error().message.find("Tools should either be a JSON schema"), std::string::npos)
        << e.what();
  }
}

TEST(MakeRequests, ExplicitParamsTakeVllmDefaultsNotGenerationConfig) {
  auto r = make_requests({Prompt("a"), Prompt::from_json({{"prompt", "b"}, {"temperature", 0.5}})},
                         {SamplingParams(json{{"top_k", 5}, {"temperature", 0.9}})});
  EXPECT_EQ(json(r[0]), (json{{"prompt", "a"},
                              {"top_k", 5},
                              {"temperature", 0.9},
                              {"top_p", 1.0},
                              {"repetition_penalty", 1.0},
                              {"min_p", 0.0},
                              {"max_tokens", 16}}));
  // max_tokens None (null) stays: until the context is full.
  EXPECT_TRUE(
      make_requests({Prompt("a")}, {SamplingParams(json{{"max_tokens", nullptr}})})[0]["max_tokens"]
          .is_null());
  EXPECT_EQ(r[1]["temperature"], 0.5);  // the request's own field wins
  // No SamplingParams: nothing added (the model's generation_config applies).
  EXPECT_EQ(json(make_requests({Prompt("a")}, {})[0]), (json{{"prompt", "a"}}));
  EXPECT_THROW(
      make_requests({Prompt("a"), Prompt("b"), Prompt("c")}, {SamplingParams(), SamplingParams()}),
      std::invalid_argument);
}

}  // namespace
}  // namespace pagoda::offline
