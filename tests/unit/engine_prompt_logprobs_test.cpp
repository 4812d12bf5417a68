// Prompt logprobs through the Engine (stories260K, CPU): each prompt
// position p >= 1 gets log_softmax(logits of position p-1)[prompt[p]], its
// rank and the top k, equal (1e-4) to a reference forward over the whole
// prompt with every logits row; the same with the prompt prefilled in
// chunks (rows within and across the logits workspace), with n > 1, and
// after preemption by recompute; carried once, on the request's first delta.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "engine/sample/prompt_logprobs.h"
#include "engine/sample/sampler.h"
#include "model_test_helpers.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

std::unique_ptr<Engine> make_engine(int64_t max_num_batched_tokens, int64_t num_blocks = 0,
                                    int64_t max_model_len = 128) {
  ExecutorOptions opts = test::stories_options();
  opts.max_model_len = max_model_len;
  opts.max_num_seqs = 8;  // logits workspace: 8 rows
  opts.max_num_batched_tokens = max_num_batched_tokens;
  opts.num_gpu_blocks_override = num_blocks;
  return test::make_test_engine(opts);
}

// "Once upon a time" followed by the first 30 of llama2.c's greedy ids:
// natural text whose last 30 tokens are each the argmax (rank 1).
struct Prompt {
  std::vector<int32_t> ids;
  size_t greedy_from = 0;  // positions >= this were the model's argmax
};

Prompt story_prompt() {
  std::ifstream in(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json");
  const nlohmann::json vec =
      nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  Prompt p;
  for (const nlohmann::json& c : vec["cases"]) {
    if (c["prompt"] != "Once upon a time") continue;
    p.ids = c["prompt_ids"].get<std::vector<int32_t>>();
    p.greedy_from = p.ids.size();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    p.ids.insert(p.ids.end(), greedy.begin(), greedy.begin() + 30);
  }
  return p;
}

// Reference: one forward over the whole prompt with every row's logits,
// then log_softmax per row (double).
std::vector<std::vector<double>> reference_logprobs(const std::vector<int32_t>& ids) {
  test::CpuModel m(test::stories_dir(), 8, 128, 1);
  std::vector<int32_t> rows(ids.size() - 1);
  std::iota(rows.begin(), rows.end(), 0);
  const std::vector<float> logits = m.run(test::one_seq_batch(ids, 0, 0, 8, rows));
  const auto V = static_cast<size_t>(m.config.vocab_size);
  std::vector<std::vector<double>> out;
  for (size_t r = 0; r < rows.size(); ++r)
    out.push_back(Sampler::log_softmax(std::span<const float>(logits.data() + r * V, V)));
  return out;
}

void expect_matches_reference(const std::vector<PromptLogprob>& got, const Prompt& p, int k) {
  const auto ref = reference_logprobs(p.ids);
  ASSERT_EQ(got.size(), p.ids.size() - 1);
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double>& lp = ref[i];
    const int32_t tok = p.ids[i + 1];
    EXPECT_EQ(got[i].token_id, tok);
    EXPECT_NEAR(got[i].logprob, lp[static_cast<size_t>(tok)], 1e-4) << "position " << i + 1;
    const auto rank = std::count_if(lp.begin(), lp.end(),
                                    [&](double v) { return v >= lp[static_cast<size_t>(tok)]; });
    EXPECT_EQ(got[i].rank, rank) << "position " << i + 1;
    if (i + 1 >= p.greedy_from) {
      EXPECT_EQ(got[i].rank, 1) << "argmax token at position " << i + 1;
    }
    ASSERT_EQ(got[i].top.size(), static_cast<size_t>(k));
    std::vector<size_t> order(lp.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lp[a] > lp[b]; });
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(got[i].top[static_cast<size_t>(j)].first,
                static_cast<int32_t>(order[static_cast<size_t>(j)]));
      EXPECT_NEAR(got[i].top[static_cast<size_t>(j)].second, lp[order[static_cast<size_t>(j)]],
                  1e-4);
    }
  }
}

// Runs one request and returns its deltas (all, in order).
std::vector<RequestOutput> run_one(Engine& e, const std::vector<int32_t>& prompt,
                                   const SamplingParams& sp, const std::string& id = "r") {
  auto req = std::make_unique<GenerateRequest>();
  req->request_id = id;
  req->prompt_token_ids = prompt;
  req->sampling = sp;
  req->output = std::make_shared<OutputChannel>();
  auto ch = req->output;
  e.add_request(std::move(req));
  e.run_until_idle();
  return ch->drain();
}

SamplingParams plp_params(int k) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 4;
  sp.prompt_logprobs = k;
  return sp;
}

// The deltas carrying prompt logprobs: exactly one, the first.
const std::vector<PromptLogprob>& only_on_first(const std::vector<RequestOutput>& deltas) {
  EXPECT_FALSE(deltas.empty());
  size_t carrying = 0;
  for (const RequestOutput& d : deltas) carrying += d.prompt_logprobs ? 1 : 0;
  EXPECT_EQ(carrying, 1u);
  EXPECT_TRUE(deltas.front().prompt_logprobs.has_value());
  static const std::vector<PromptLogprob> none;
  return deltas.front().prompt_logprobs ? *deltas.front().prompt_logprobs : none;
}

TEST(EnginePromptLogprobs, WholePrefillEqualsReference) {
  const Prompt p = story_prompt();
  ASSERT_EQ(p.ids.size(), 35u);
  auto e = make_engine(128);  // one chunk: 34 prompt rows > the 8-row logits workspace
  const auto deltas = run_one(*e, p.ids, plp_params(5));
  expect_matches_reference(only_on_first(deltas), p, 5);
  RequestOutput merged;
  for (const RequestOutput& d : deltas) merge_delta(merged, d);
  EXPECT_EQ(merged.token_ids.size(), 4u);
}

TEST(EnginePromptLogprobs, ChunkedPrefillEqualsUnchunked) {
  const Prompt p = story_prompt();
  for (int64_t chunk : {5, 8, 16}) {
    SCOPED_TRACE(chunk);
    auto e = make_engine(chunk);
    const auto deltas = run_one(*e, p.ids, plp_params(3));
    expect_matches_reference(only_on_first(deltas), p, 3);
  }
}

// The scheduler scores at most max_prompt_logprob_tokens prompt positions a
// step (their [rows, vocab] logits are held at once: a 4000-token Qwen2
// prompt took 2.4 GB): the prompt is then prefilled in chunks of that many
// although the token budget would take it whole, with the same result.
TEST(EnginePromptLogprobs, ScoredPositionsPerStepAreBounded) {
  const Prompt p = story_prompt();
  ExecutorOptions opts = test::stories_options();
  opts.max_num_batched_tokens = 128;
  for (int64_t cap : {1, 7, 34}) {
    SCOPED_TRACE(cap);
    auto e = test::make_test_engine(opts, 0, cap);
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = "capped";
    req->prompt_token_ids = p.ids;
    req->sampling = plp_params(2);
    req->output = std::make_shared<OutputChannel>();
    auto ch = req->output;
    e->add_request(std::move(req));
    int64_t steps = 0;
    while (e->step()) ++steps;
    // 35 prompt tokens in chunks of `cap`, then 3 more decode steps.
    EXPECT_EQ(steps, (35 + cap - 1) / cap + 3);
    expect_matches_reference(only_on_first(ch->drain()), p, 2);
  }
  ExecutorOptions bad = test::stories_options();
  EXPECT_THROW(test::make_test_engine(bad, 0, 0), std::invalid_argument);
}

TEST(EnginePromptLogprobs, ZeroTopAndOneTokenPrompt) {
  const Prompt p = story_prompt();
  auto e = make_engine(128);
  expect_matches_reference(only_on_first(run_one(*e, p.ids, plp_params(0), "k0")), p, 0);
  // A one-token prompt has no position to score: an empty list (vLLM: [None]).
  // A copy: the deltas only_on_first points into are a temporary.
  const std::vector<PromptLogprob> one = only_on_first(run_one(*e, {1}, plp_params(2), "one"));
  EXPECT_TRUE(one.empty());
  // Not asked for: never carried.
  SamplingParams sp = plp_params(0);
  sp.prompt_logprobs.reset();
  for (const RequestOutput& d : run_one(*e, p.ids, sp, "none")) EXPECT_FALSE(d.prompt_logprobs);
}

TEST(EnginePromptLogprobs, ParallelSamplingCarriesThemOnceForTheRequest) {
  const Prompt p = story_prompt();
  auto e = make_engine(16);
  SamplingParams sp = plp_params(2);
  sp.n = 3;
  sp.temperature = 1.0f;
  sp.seed = 3;
  const auto deltas = run_one(*e, p.ids, sp);
  expect_matches_reference(only_on_first(deltas), p, 2);
}

// The samples of a request run on their own: with the scored positions
// capped at 7 a step, samples 1 and 2 (which score nothing) prefill the
// 35-token prompt in the first step and sample before sample 0 has scored
// it; their deltas wait, so the prompt logprobs are still on the request's
// first delta, once, and every choice arrives whole.
TEST(EnginePromptLogprobs, SamplesThatSampleBeforeTheScoringOneWaitForIt) {
  const Prompt p = story_prompt();
  ExecutorOptions opts = test::stories_options();
  opts.max_num_batched_tokens = 128;
  auto e = test::make_test_engine(opts, 0, 7);
  SamplingParams sp = plp_params(2);
  sp.n = 3;
  sp.temperature = 1.0f;
  sp.seed = 5;
  sp.max_tokens = 6;
  sp.ignore_eos = true;
  auto req = std::make_unique<GenerateRequest>();
  req->request_id = "held";
  req->prompt_token_ids = p.ids;
  req->sampling = sp;
  req->output = std::make_shared<OutputChannel>();
  auto ch = req->output;
  e->add_request(std::move(req));
  ASSERT_TRUE(e->step());
  EXPECT_TRUE(ch->drain().empty());  // samples 1 and 2 sampled; held
  std::vector<RequestOutput> deltas;
  while (e->step())
    for (RequestOutput& d : ch->drain()) deltas.push_back(std::move(d));
  for (RequestOutput& d : ch->drain()) deltas.push_back(std::move(d));
  expect_matches_reference(only_on_first(deltas), p, 2);
  std::vector<RequestOutput> merged(3);
  for (const RequestOutput& d : deltas) merge_delta(merged[static_cast<size_t>(d.index)], d);
  for (const RequestOutput& c : merged) {
    EXPECT_EQ(c.token_ids.size(), 6u);
    EXPECT_TRUE(c.finished);
  }
  EXPECT_TRUE(ch->finished());
}

TEST(EnginePromptLogprobs, PreemptionDoesNotScoreOrSendThemAgain) {
  const Prompt p = story_prompt();  // 35 tokens: 3 blocks of 16
  // 6 blocks: both requests prefill (3 + 3), then the first one's decode
  // needs a fourth block and the second is preempted and recomputed.
  auto e = make_engine(128, 6, 96);  // 96 tokens: one sequence fits the 6 blocks
  SamplingParams sp = plp_params(2);
  sp.max_tokens = 20;
  sp.ignore_eos = true;
  std::vector<std::shared_ptr<OutputChannel>> chs;
  for (const char* id : {"a", "b"}) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = id;
    req->prompt_token_ids = p.ids;
    req->sampling = sp;
    req->output = std::make_shared<OutputChannel>();
    chs.push_back(req->output);
    e->add_request(std::move(req));
  }
  e->run_until_idle();
  EXPECT_GT(e->stats().num_preemptions_total, 0);
  for (auto& ch : chs) {
    const auto deltas = ch->drain();
    expect_matches_reference(only_on_first(deltas), p, 2);
    RequestOutput merged;
    for (const RequestOutput& d : deltas) merge_delta(merged, d);
    EXPECT_EQ(merged.token_ids.size(), 20u);
  }
}

TEST(EnginePromptLogprobs, ScorePromptTokenRanksTiesAsVllm) {
  // logprobs >= the token's own count, itself included.
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, 0.5f};
  const PromptLogprob a = score_prompt_token(row, 2, 2);
  EXPECT_EQ(a.rank, 2);
  ASSERT_EQ(a.top.size(), 2u);
  EXPECT_EQ(a.top[0].first, 1);  // ties: lower id first
  EXPECT_EQ(a.top[1].first, 2);
  EXPECT_EQ(score_prompt_token(row, 3, 0).rank, 4);
  EXPECT_TRUE(score_prompt_token(row, 3, 0).top.empty());
  EXPECT_THROW(score_prompt_token(row, 4, 1), std::invalid_argument);
}

TEST(EnginePromptLogprobs, OutOfRangeIsAnError) {
  auto e = make_engine(128);
  const auto deltas = run_one(*e, {1, 2, 3}, plp_params(21));
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_NE(deltas[0].error.find("prompt_logprobs"), std::string::npos) << deltas[0].error;
}

}  // namespace
}  // namespace pagoda
