// Engine end to end with the FakeExecutor (paged-KV-checking fake model) and
// the FakeTokenizer: every greedy result is compared with reference_greedy(),
// which runs the same fake model straight on the token list, no paging.
#include "engine/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/output_channel.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

using testing::FakeExecutor;
using testing::FakeTokenizer;
using testing::reference_greedy;

constexpr int64_t kVocab = 40;
constexpr int32_t kEos = 2;

std::vector<int32_t> make_prompt(uint64_t id, int64_t len) {
  std::vector<int32_t> p = {1};  // BOS
  for (int64_t j = 1; j < len; ++j)
    p.push_back(5 + static_cast<int32_t>(testing::mix64(id * 1000 + static_cast<uint64_t>(j)) % (kVocab - 5)));
  return p;
}

struct Harness {
  FakeExecutor* exec = nullptr;
  std::unique_ptr<Engine> engine;
  explicit Harness(int64_t num_blocks, int64_t block_size = 4, EngineConfig cfg = {}) {
    auto e = std::make_unique<FakeExecutor>(kVocab, num_blocks, block_size);
    exec = e.get();
    cfg.eos_token_ids = {kEos};
    cfg.log_stats = false;
    engine = std::make_unique<Engine>(cfg, std::move(e), std::make_shared<FakeTokenizer>(kVocab));
  }
  std::shared_ptr<OutputChannel> add(const std::string& id, std::vector<int32_t> prompt, SamplingParams sp) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = id;
    req->prompt_token_ids = std::move(prompt);
    req->sampling = sp;
    req->output = std::make_shared<OutputChannel>();
    auto ch = req->output;
    engine->add_request(std::move(req));
    return ch;
  }
};

// (A named helper: GCC 12 -O3 warns falsely (-Wrestrict) on "r" + to_string.)
std::string rid(const char* prefix, int i) { return fmt::format("{}{}", prefix, i); }

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  return sp;
}

std::string text_of(const std::vector<int32_t>& ids) {
  FakeTokenizer tok(kVocab);
  return tok.decode(ids, true);
}

// Checks a finished greedy result against the reference (EOS stops it).
void expect_reference(const RequestOutput& got, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  std::vector<int32_t> want = reference_greedy(prompt, max_tokens, kVocab, {kEos});
  ASSERT_TRUE(got.finished) << got.request_id;
  EXPECT_EQ(got.error, "");
  EXPECT_EQ(got.token_ids, want) << got.request_id;
  bool eos = !want.empty() && want.back() == kEos;
  // vLLM's check_stop tests length first: EOS as the max_tokens-th token is
  // "length".
  bool stopped = eos && static_cast<int64_t>(want.size()) < max_tokens;
  EXPECT_EQ(got.finish_reason, stopped ? FinishReason::kStop : FinishReason::kLength) << got.request_id;
  std::vector<int32_t> shown = want;
  if (eos) shown.pop_back();
  EXPECT_EQ(got.text, text_of(shown)) << got.request_id;
  EXPECT_EQ(got.prompt_tokens, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(got.completion_tokens, static_cast<int64_t>(want.size()));
}

TEST(Engine, SixteenConcurrentRequestsMatchTheReferenceAndRunningAlone) {
  Harness h(256);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(make_prompt(static_cast<uint64_t>(i), 3 + i * 2));
    chans.push_back(h.add(rid("r", i), prompts.back(), greedy(4 + i)));
  }
  h.engine->run_until_idle();
  EXPECT_GT(h.exec->max_batch_seqs(), 8);  // they really were batched
  std::vector<RequestOutput> batched;
  for (int i = 0; i < 16; ++i) {
    batched.push_back(collect(*chans[static_cast<size_t>(i)]));
    expect_reference(batched.back(), prompts[static_cast<size_t>(i)], 4 + i);
  }
  // Each request alone gives the same.
  for (int i = 0; i < 16; i += 5) {
    Harness alone(256);
    auto ch = alone.add("a", prompts[static_cast<size_t>(i)], greedy(4 + i));
    alone.engine->run_until_idle();
    RequestOutput got = collect(*ch);
    EXPECT_EQ(got.token_ids, batched[static_cast<size_t>(i)].token_ids);
    EXPECT_EQ(got.text, batched[static_cast<size_t>(i)].text);
  }
  EngineStats st = h.engine->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.requests_finished_total["length"] + st.requests_finished_total["stop"], 16);
}

TEST(Engine, TooSmallKvCacheWaitsAndPreemptsYetCompletesAllCorrectly) {
  // 12 blocks of 4 = 48 token slots for 8 requests needing up to 34 each.
  Harness h(12);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(make_prompt(100 + static_cast<uint64_t>(i), 6 + i));
    SamplingParams sp = greedy(20);
    sp.ignore_eos = true;
    chans.push_back(h.add(rid("r", i), prompts.back(), sp));
  }
  h.engine->run_until_idle();
  for (int i = 0; i < 8; ++i) {
    RequestOutput got = collect(*chans[static_cast<size_t>(i)]);
    EXPECT_EQ(got.token_ids, reference_greedy(prompts[static_cast<size_t>(i)], 20, kVocab));
    EXPECT_EQ(got.finish_reason, FinishReason::kLength);
  }
  EngineStats st = h.engine->stats();
  EXPECT_GT(st.num_preemptions_total, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_total, 12);
}

TEST(Engine, ChunkedPrefillOfALongPromptGivesTheSameResult) {
  EngineConfig cfg;
  cfg.max_num_batched_tokens = 8;
  Harness h(64, 4, cfg);
  std::vector<int32_t> prompt = make_prompt(7, 30);
  std::vector<int32_t> short_prompt = make_prompt(8, 5);
  auto ch = h.add("long", prompt, greedy(10));
  auto ch2 = h.add("short", short_prompt, greedy(10));
  h.engine->run_until_idle();
  expect_reference(collect(*ch), prompt, 10);
  expect_reference(collect(*ch2), short_prompt, 10);
  EXPECT_LE(h.exec->max_batch_tokens(), 8);
  EXPECT_GE(h.exec->rows_without_logits(), 3);  // 30 tokens in chunks of <= 8
}

TEST(Engine, AbortFreesBlocksAndEndsWithAbort) {
  Harness h(64);
  SamplingParams sp = greedy(50);
  sp.ignore_eos = true;
  auto running = h.add("run", make_prompt(1, 9), sp);
  auto other = h.add("other", make_prompt(2, 5), greedy(3));
  for (int i = 0; i < 3; ++i) h.engine->step();
  EXPECT_GT(h.engine->stats().kv_blocks_used, 0);
  h.engine->abort_request("run");
  h.engine->abort_request("no-such-request");  // ignored
  h.engine->run_until_idle();
  RequestOutput got = collect(*running);
  EXPECT_EQ(got.finish_reason, FinishReason::kAbort);
  EXPECT_EQ(got.token_ids.size(), 3u);  // one token per step before the abort
  expect_reference(collect(*other), make_prompt(2, 5), 3);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().requests_finished_total["abort"], 1);
}

// Shutdown (Engine::stop / the destructor): a request still in the queue
// was accepted like a running one, so it ends the same way, with an "abort"
// delta per choice and no error (it used to get the error "engine stopped",
// which the API reported as a 400).
TEST(Engine, ShutdownEndsQueuedAndRunningRequestsWithAbortNotAnError) {
  Harness h(64);
  SamplingParams sp = greedy(50);
  sp.ignore_eos = true;
  auto running = h.add("run", make_prompt(1, 9), sp);
  h.engine->step();  // "run" is admitted and has its first token
  auto queued = h.add("queued", make_prompt(2, 5), sp);
  SamplingParams two = sp;
  two.n = 2;
  auto queued_n2 = h.add("queued-n2", make_prompt(3, 5), two);
  h.engine.reset();  // not started: the destructor aborts what it holds
  RequestOutput r = collect(*running);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
  EXPECT_EQ(r.token_ids.size(), 1u);
  RequestOutput q = collect(*queued);
  EXPECT_EQ(q.error, "");
  EXPECT_EQ(q.finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(q.token_ids.empty());
  EXPECT_EQ(q.prompt_tokens, 5);
  std::vector<RequestOutput> choices = collect_all(*queued_n2);
  ASSERT_EQ(choices.size(), 2u);
  for (const RequestOutput& c : choices) {
    EXPECT_EQ(c.error, "");
    EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
  }
}

TEST(Engine, AbortOfAWaitingRequest) {
  EngineConfig cfg;
  cfg.max_num_seqs = 1;
  Harness h(64, 4, cfg);
  auto first = h.add("first", make_prompt(1, 5), greedy(4));
  auto second = h.add("second", make_prompt(2, 5), greedy(4));
  h.engine->step();  // admits "first" only
  EXPECT_EQ(h.engine->stats().num_waiting, 1);
  h.engine->abort_request("second");
  h.engine->run_until_idle();
  RequestOutput got = collect(*second);
  EXPECT_EQ(got.finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(got.token_ids.empty());
  expect_reference(collect(*first), make_prompt(1, 5), 4);
}

TEST(Engine, MaxTokensAndMaxModelLenFinishWithLength) {
  EngineConfig cfg;
  cfg.max_model_len = 24;
  Harness h(64, 4, cfg);
  SamplingParams a = greedy(5);
  a.ignore_eos = true;
  SamplingParams b;  // max_tokens unset: max_model_len - prompt_len
  b.temperature = 0.0f;
  b.ignore_eos = true;
  auto ca = h.add("a", make_prompt(3, 7), a);
  auto cb = h.add("b", make_prompt(4, 10), b);
  h.engine->run_until_idle();
  RequestOutput ra = collect(*ca), rb = collect(*cb);
  EXPECT_EQ(ra.token_ids.size(), 5u);
  EXPECT_EQ(ra.finish_reason, FinishReason::kLength);
  EXPECT_EQ(rb.token_ids.size(), 14u);
  EXPECT_EQ(rb.finish_reason, FinishReason::kLength);
  EXPECT_EQ(rb.token_ids, reference_greedy(make_prompt(4, 10), 14, kVocab));
}

// A prompt whose greedy continuation hits EOS within `within` tokens.
std::vector<int32_t> prompt_reaching_eos(int64_t within, size_t* eos_at) {
  for (uint64_t id = 0; id < 10000; ++id) {
    std::vector<int32_t> p = make_prompt(5000 + id, 6);
    std::vector<int32_t> g = reference_greedy(p, within, kVocab);
    for (size_t k = 1; k < g.size(); ++k)
      if (g[k] == kEos) {
        *eos_at = k;
        return p;
      }
  }
  return {};
}

TEST(Engine, EosStopsUnlessIgnoreEos) {
  size_t eos_at = 0;
  std::vector<int32_t> p = prompt_reaching_eos(30, &eos_at);
  ASSERT_FALSE(p.empty());
  Harness h(64);
  auto stop = h.add("stop", p, greedy(40));
  SamplingParams ign = greedy(40);
  ign.ignore_eos = true;
  auto through = h.add("through", p, ign);
  h.engine->run_until_idle();
  RequestOutput s = collect(*stop), t = collect(*through);
  EXPECT_EQ(s.finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.token_ids.size(), eos_at + 1);  // EOS id included, its text not
  EXPECT_EQ(s.token_ids.back(), kEos);
  EXPECT_FALSE(s.stop_token_id.has_value());
  EXPECT_EQ(t.finish_reason, FinishReason::kLength);
  EXPECT_EQ(t.token_ids, reference_greedy(p, 40, kVocab));
}

TEST(Engine, MinTokensSuppressesEos) {
  size_t eos_at = 0;
  std::vector<int32_t> p = prompt_reaching_eos(30, &eos_at);
  ASSERT_FALSE(p.empty());
  Harness h(64);
  SamplingParams sp = greedy(static_cast<int64_t>(eos_at) + 5);
  sp.min_tokens = static_cast<int64_t>(eos_at) + 5;
  auto ch = h.add("m", p, sp);
  h.engine->run_until_idle();
  RequestOutput got = collect(*ch);
  EXPECT_EQ(got.token_ids.size(), eos_at + 5);
  for (int32_t t : got.token_ids) EXPECT_NE(t, kEos);
}

TEST(Engine, StopTokenIdsStopAndNameTheToken) {
  std::vector<int32_t> p = make_prompt(11, 8);
  std::vector<int32_t> full = reference_greedy(p, 30, kVocab, {kEos});
  ASSERT_GE(full.size(), 6u);
  int32_t stop_id = full[5];
  size_t first = 0;
  while (full[first] != stop_id) ++first;
  Harness h(64);
  SamplingParams sp = greedy(30);
  sp.stop_token_ids = {stop_id};
  auto ch = h.add("s", p, sp);
  h.engine->run_until_idle();
  RequestOutput got = collect(*ch);
  EXPECT_EQ(got.finish_reason, FinishReason::kStop);
  ASSERT_TRUE(got.stop_token_id.has_value());
  EXPECT_EQ(*got.stop_token_id, stop_id);
  EXPECT_EQ(got.token_ids, std::vector<int32_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(first) + 1));
  // The stop token's text is not in the output.
  EXPECT_EQ(got.text, text_of(std::vector<int32_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(first))));
}

TEST(Engine, StopStringsSpanningTokensNeverLeak) {
  std::vector<int32_t> p = make_prompt(21, 6);
  SamplingParams base = greedy(30);
  base.ignore_eos = true;
  std::string full = text_of(reference_greedy(p, 30, kVocab));
  ASSERT_GE(full.size(), 20u);
  // Pieces are 2 bytes: a 3-byte string starting at an odd offset spans 2
  // tokens' boundary.
  std::string stop = full.substr(9, 3);
  size_t at = full.find(stop);
  for (bool include : {false, true}) {
    Harness h(64);
    SamplingParams sp = base;
    sp.stop = {"never-matches-xyz", stop};
    sp.include_stop_str_in_output = include;
    auto ch = h.add("s", p, sp);
    std::string streamed;
    while (h.engine->step()) {
      for (RequestOutput& d : ch->drain()) {
        streamed += d.text;
        // Nothing past the cut point is ever emitted, even transiently.
        EXPECT_LE(streamed.size(), at + (include ? stop.size() : 0));
      }
    }
    for (RequestOutput& d : ch->drain()) {
      streamed += d.text;
      if (d.finished) {
        EXPECT_EQ(d.finish_reason, FinishReason::kStop);
        ASSERT_TRUE(d.stop_str.has_value());
        EXPECT_EQ(*d.stop_str, stop);
      }
    }
    EXPECT_EQ(streamed, full.substr(0, at + (include ? stop.size() : 0))) << include;
  }
}

TEST(Engine, SameSeedSameOutputAcrossBatchCompositions) {
  std::vector<int32_t> p = make_prompt(31, 7);
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.9f;
  sp.seed = 1234;
  sp.max_tokens = 25;
  sp.ignore_eos = true;
  std::vector<std::vector<int32_t>> results;
  for (int others : {0, 3, 9}) {
    EngineConfig cfg;
    cfg.max_num_batched_tokens = 16 + others;  // also varies the chunking
    Harness h(24, 4, cfg);   // small: preemption may recompute
    std::vector<std::shared_ptr<OutputChannel>> noise;
    for (int i = 0; i < others; ++i) {
      SamplingParams o = sp;
      o.seed.reset();
      noise.push_back(h.add(rid("n", i), make_prompt(200 + static_cast<uint64_t>(i), 4 + i), o));
    }
    auto ch = h.add("seeded", p, sp);
    h.engine->run_until_idle();
    results.push_back(collect(*ch).token_ids);
  }
  EXPECT_EQ(results[0].size(), 25u);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // A different seed samples differently (25 draws over 40 tokens).
  Harness h(64);
  sp.seed = 99;
  auto ch = h.add("other-seed", p, sp);
  h.engine->run_until_idle();
  EXPECT_NE(collect(*ch).token_ids, results[0]);
}

TEST(Engine, InvalidRequestsFinishAtOnceWithAnError) {
  EngineConfig cfg;
  cfg.max_model_len = 64;
  Harness h(4, 4, cfg);  // 16 token slots
  auto empty = h.add("empty", {}, greedy(4));
  auto too_long = h.add("long", make_prompt(1, 60), greedy(10));
  auto no_fit = h.add("nofit", make_prompt(2, 20), greedy(4));
  auto bad_id = h.add("badid", {1, 99}, greedy(4));
  auto ok = h.add("ok", make_prompt(3, 5), greedy(4));
  for (auto* ch : {&empty, &too_long, &no_fit, &bad_id}) {
    ASSERT_TRUE((*ch)->finished());  // immediately, before any step
    RequestOutput r = collect(**ch);
    EXPECT_FALSE(r.error.empty());
    EXPECT_TRUE(r.token_ids.empty());
  }
  h.engine->run_until_idle();
  expect_reference(collect(*ok), make_prompt(3, 5), 4);
}

TEST(Engine, DuplicateRequestIdIsRejectedWithoutHarmingTheFirst) {
  Harness h(64);
  auto a = h.add("same", make_prompt(1, 5), greedy(6));
  auto b = h.add("same", make_prompt(2, 5), greedy(6));
  h.engine->run_until_idle();
  RequestOutput rb = collect(*b);
  EXPECT_FALSE(rb.error.empty());
  expect_reference(collect(*a), make_prompt(1, 5), 6);
}

TEST(Engine, SequenceLongerThanTheWholeCacheEndsWithLengthNotAHang) {
  Harness h(3, 4);  // 12 slots; prompt fits, the generation cannot
  SamplingParams sp = greedy(30);
  sp.ignore_eos = true;
  auto ch = h.add("big", make_prompt(5, 6), sp);
  h.engine->run_until_idle();
  RequestOutput got = collect(*ch);
  EXPECT_EQ(got.finish_reason, FinishReason::kLength);
  EXPECT_EQ(got.token_ids, reference_greedy(make_prompt(5, 6), 7, kVocab));  // 6 + 6 = 12 slots, +1 sampled
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h.engine->stats().requests_finished_total["length"], 1);
}

}  // namespace
}  // namespace pagoda
