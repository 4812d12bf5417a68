// Sampling surface through the Engine API on a real model (stories260K, CPU,
// SentencePiece): n > 1 with shared prompt blocks (greedy choices equal
// llama2.c run.c's greedy ids; seeded choices reproduce and equal n = 1 runs
// with seed + index), and stop strings spanning 2-4 tokens, partial matches
// that are not one, stop token ids: streamed text is always a prefix of
// llama2.c's text and never contains any part of a matched stop string
// unless include_stop_str_in_output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

constexpr size_t kTokens = 48;  // of the reference, kept short for ASan runs

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::unique_ptr<Engine> make_engine(int64_t num_blocks = 0) {
  ExecutorOptions opts = test::stories_options();
  opts.num_gpu_blocks_override = num_blocks;
  return test::make_test_engine(opts);
}

struct Reference {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;  // first kTokens of llama2.c's
  std::string text;                 // llama2.c's text of the whole run
};

Reference once_upon_a_time() {
  Reference r;
  const nlohmann::json vec =
      nlohmann::json::parse(read_file(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json"));
  for (const nlohmann::json& c : vec["cases"]) {
    if (c["prompt"] != "Once upon a time") continue;
    r.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    r.greedy_ids = c["greedy_ids"].get<std::vector<int32_t>>();
  }
  r.greedy_ids.resize(kTokens);
  std::string t = read_file(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_runc_greedy_once_upon_a_time.txt");
  const std::string prefix = "Once upon a time";
  EXPECT_EQ(t.rfind(prefix, 0), 0u);
  r.text = t.substr(prefix.size());
  return r;
}

std::shared_ptr<OutputChannel> submit(Engine& e, const std::string& id, const std::vector<int32_t>& prompt,
                                      const SamplingParams& sp) {
  auto req = std::make_unique<GenerateRequest>();
  req->request_id = id;
  req->prompt_token_ids = prompt;
  req->sampling = sp;
  req->output = std::make_shared<OutputChannel>();
  auto ch = req->output;
  e.add_request(std::move(req));
  return ch;
}

SamplingParams greedy() {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = static_cast<int64_t>(kTokens);
  return sp;
}

TEST(EngineStoriesSampling, GreedyNTwoGivesTwoIdenticalChoicesEqualToLlama2c) {
  const Reference ref = once_upon_a_time();
  auto engine = make_engine();
  SamplingParams sp = greedy();
  sp.n = 2;
  auto ch = submit(*engine, "g", ref.prompt_ids, sp);
  engine->run_until_idle();
  std::vector<RequestOutput> got = collect_all(*ch);
  ASSERT_EQ(got.size(), 2u);
  for (const RequestOutput& c : got) {
    EXPECT_EQ(c.token_ids, ref.greedy_ids);
    EXPECT_EQ(ref.text.rfind(c.text, 0), 0u) << c.text;  // a prefix of run.c's text
    EXPECT_EQ(c.finish_reason, FinishReason::kLength);
  }
  EXPECT_EQ(got[0].text, got[1].text);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST(EngineStoriesSampling, SeededNThreeDiffersPerChoiceAndReproduces) {
  const Reference ref = once_upon_a_time();
  SamplingParams sp;
  sp.n = 3;
  sp.seed = 42;
  sp.temperature = 1.0f;
  sp.max_tokens = 32;
  sp.ignore_eos = true;
  std::vector<std::vector<RequestOutput>> runs;
  for (int run = 0; run < 2; ++run) {
    auto engine = make_engine();
    // Another request in the batch must not change the seeded samples.
    SamplingParams noise = sp;
    noise.n = 1;
    noise.seed.reset();
    auto other = submit(*engine, "noise", {1, 403, 407}, noise);
    auto ch = submit(*engine, "s", ref.prompt_ids, sp);
    engine->run_until_idle();
    runs.push_back(collect_all(*ch));
    EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  }
  ASSERT_EQ(runs[0].size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[0][i].token_ids.size(), 32u);
    EXPECT_EQ(runs[0][i].token_ids, runs[1][i].token_ids) << i;
    EXPECT_EQ(runs[0][i].text, runs[1][i].text) << i;
    distinct.insert(runs[0][i].token_ids);
  }
  EXPECT_EQ(distinct.size(), 3u);
  // Choice i is what n = 1 with seed 42 + i samples (alone, unshared KV).
  auto engine = make_engine();
  for (size_t i = 0; i < 3; ++i) {
    SamplingParams one = sp;
    one.n = 1;
    one.seed = 42 + i;
    auto ch = submit(*engine, fmt::format("one{}", i), ref.prompt_ids, one);
    engine->run_until_idle();
    EXPECT_EQ(collect(*ch).token_ids, runs[0][i].token_ids) << i;
  }
}

// Streams one request step by step; every delta must keep the streamed text
// a prefix of `allowed` (so nothing beyond it is ever sent, even briefly).
RequestOutput stream(Engine& e, const std::vector<int32_t>& prompt, const SamplingParams& sp,
                     const std::string& allowed) {
  auto ch = submit(e, "stream", prompt, sp);
  RequestOutput merged;
  auto take = [&] {
    for (RequestOutput& d : ch->drain()) {
      merged.text += d.text;
      merged.token_ids.insert(merged.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
      EXPECT_EQ(allowed.rfind(merged.text, 0), 0u) << "streamed beyond the allowed text: " << merged.text;
      if (d.finished) {
        merged.finished = true;
        merged.finish_reason = d.finish_reason;
        merged.stop_str = d.stop_str;
        merged.stop_token_id = d.stop_token_id;
      }
    }
  };
  while (e.step()) take();
  take();
  return merged;
}

// Byte offsets in ref.text where each greedy token's text starts (from the
// engine's own per-token deltas, checked against llama2.c's text).
std::vector<size_t> token_starts(Engine& e, const Reference& ref) {
  auto ch = submit(e, "bounds", ref.prompt_ids, greedy());
  std::vector<size_t> starts;
  std::string text;
  while (e.step())
    for (RequestOutput& d : ch->drain()) {
      EXPECT_EQ(d.token_ids.size(), 1u);
      starts.push_back(text.size());
      text += d.text;
    }
  for (RequestOutput& d : ch->drain()) {
    starts.push_back(text.size());
    text += d.text;
  }
  EXPECT_EQ(ref.text.rfind(text, 0), 0u);
  starts.push_back(text.size());
  return starts;  // kTokens + 1 entries
}

TEST(EngineStoriesSampling, StopStringsSpanningTwoToFourTokensNeverLeak) {
  const Reference ref = once_upon_a_time();
  auto engine = make_engine();
  const std::vector<size_t> b = token_starts(*engine, ref);
  ASSERT_EQ(b.size(), kTokens + 1);
  for (size_t k = 2; k <= 4; ++k) {
    // From the last byte of token j to the first byte of token j + k - 1:
    // exactly k tokens; j is the first token where that string's first
    // occurrence is this one.
    std::string stop;
    size_t j = 4, at = std::string::npos;
    for (; j + k < kTokens; ++j) {
      if (b[j + 1] - b[j] < 2 || b[j + k] - b[j + k - 1] < 2) continue;
      stop = ref.text.substr(b[j + 1] - 1, b[j + k - 1] + 1 - (b[j + 1] - 1));
      at = ref.text.find(stop);
      if (at == b[j + 1] - 1) break;
    }
    ASSERT_LT(j + k, kTokens) << "no " << k << "-token stop string found";
    for (bool include : {false, true}) {
      SamplingParams sp = greedy();
      sp.stop = {"zebra-never", stop};
      sp.include_stop_str_in_output = include;
      const std::string want = ref.text.substr(0, at + (include ? stop.size() : 0));
      RequestOutput got = stream(*engine, ref.prompt_ids, sp, want);
      EXPECT_EQ(got.text, want) << "k=" << k << " stop='" << stop << "'";
      EXPECT_EQ(got.finish_reason, FinishReason::kStop);
      EXPECT_EQ(got.stop_str, stop);
      EXPECT_FALSE(got.stop_token_id.has_value());
      // The token that completed the match is the last one returned.
      EXPECT_EQ(got.token_ids, std::vector<int32_t>(ref.greedy_ids.begin(),
                                                    ref.greedy_ids.begin() + static_cast<std::ptrdiff_t>(j + k)));
    }
  }
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST(EngineStoriesSampling, PartialStopMatchesThatAreNotOneAreReleasedWhole) {
  const Reference ref = once_upon_a_time();
  auto engine = make_engine();
  const std::vector<size_t> b = token_starts(*engine, ref);
  const std::string full = ref.text.substr(0, b[kTokens]);
  // Three-token prefixes of the text followed by a byte that never follows
  // them: each partial match is held back, then released when it fails.
  std::vector<std::string> stops;
  for (size_t j : {3u, 9u, 17u}) {
    std::string s = ref.text.substr(b[j] + 1, b[j + 3] - b[j] - 1) + "#";
    ASSERT_EQ(ref.text.find(s), std::string::npos);
    stops.push_back(s);
  }
  stops.push_back(" Lily was happy#");  // a common prefix, never completed
  SamplingParams sp = greedy();
  sp.stop = stops;
  RequestOutput got = stream(*engine, ref.prompt_ids, sp, full);
  EXPECT_EQ(got.text, full);
  EXPECT_EQ(got.token_ids, ref.greedy_ids);
  EXPECT_EQ(got.finish_reason, FinishReason::kLength);
  EXPECT_FALSE(got.stop_str.has_value());
}

TEST(EngineStoriesSampling, StopTokenIdIsReportedAndItsTextHidden) {
  const Reference ref = once_upon_a_time();
  auto engine = make_engine();
  const std::vector<size_t> b = token_starts(*engine, ref);
  const int32_t stop_id = ref.greedy_ids[10];
  size_t first = 0;
  while (ref.greedy_ids[first] != stop_id) ++first;
  for (bool include : {false, true}) {
    SamplingParams sp = greedy();
    sp.stop_token_ids = {stop_id};
    sp.include_stop_str_in_output = include;
    const std::string want = ref.text.substr(0, include ? b[first + 1] : b[first]);
    RequestOutput got = stream(*engine, ref.prompt_ids, sp, want);
    EXPECT_EQ(got.text, want);
    EXPECT_EQ(got.finish_reason, FinishReason::kStop);
    EXPECT_EQ(got.stop_token_id, stop_id);
    EXPECT_FALSE(got.stop_str.has_value());
    EXPECT_EQ(got.token_ids.size(), first + 1);
  }
}

TEST(EngineStoriesSampling, SharedPromptBlocksOnTheRealModel) {
  // A 40-token prompt in blocks of 16: in the first step samples 1 and 2
  // take sample 0's 2 full blocks from the prefix cache and each computes
  // the 8-token tail into a block of its own.
  const Reference ref = once_upon_a_time();
  auto engine = make_engine(64);
  std::vector<int32_t> prompt = ref.prompt_ids;
  prompt.insert(prompt.end(), ref.greedy_ids.begin(), ref.greedy_ids.begin() + 35);  // 40 tokens
  SamplingParams sp = greedy();
  sp.n = 3;
  sp.max_tokens = 8;
  auto ch = submit(*engine, "p", prompt, sp);
  ASSERT_TRUE(engine->step());
  EXPECT_EQ(engine->stats().kv_blocks_used, 3 + 2);  // sample 0's 40 tokens + a tail block each
  EXPECT_EQ(engine->stats().prefix_cache_hits_total, 2 * 32);
  ASSERT_TRUE(engine->step());
  EXPECT_EQ(engine->stats().kv_blocks_used, 3 + 2);
  engine->run_until_idle();
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  std::vector<RequestOutput> got = collect_all(*ch);
  ASSERT_EQ(got.size(), 3u);
  // Greedy continuation of the reference run: the next reference tokens.
  const std::vector<int32_t> want(ref.greedy_ids.begin() + 35, ref.greedy_ids.begin() + 43);
  for (const RequestOutput& c : got) EXPECT_EQ(c.token_ids, want);
}

}  // namespace
}  // namespace pagoda
