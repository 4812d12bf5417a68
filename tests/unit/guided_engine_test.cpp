// Guided decoding through the engine (offline LLM on tiny-random-qwen2-chat,
// CPU) and the host Sampler's mask rules: the output ends ("stop") when the
// constraint can only end, even before min_tokens; EOS is drawn only where
// the automaton accepts; a state that allows nothing ends the output.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/sample/sampler.h"
#include "server/llm.h"

namespace pagoda {
namespace {

using nlohmann::json;

class GuidedEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineArgs args;
    args.device = "cpu";
    llm_ =
        new offline::LLM(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat", args);
  }
  static void TearDownTestSuite() {
    delete llm_;
    llm_ = nullptr;
  }
  static offline::CompletionOutput run(json req) {
    req["prompt"] = "Q:";
    return llm_->generate({offline::Prompt::from_json(req)}, std::nullopt, false)
        .at(0)
        .outputs.at(0);
  }
  static offline::LLM* llm_;
};
offline::LLM* GuidedEngine::llm_ = nullptr;

TEST_F(GuidedEngine, ChoiceEndsWhenItCanOnlyEndEvenBeforeMinTokens) {
  for (int seed = 0; seed < 5; ++seed) {
    auto o = run({{"guided_choice", {"yes", "no way"}},
                  {"temperature", 1.0},
                  {"seed", seed},
                  {"min_tokens", 8},
                  {"max_tokens", 20}});
    EXPECT_TRUE(o.text == "yes" || o.text == "no way") << o.text;
    EXPECT_EQ(o.finish_reason, "stop");
    EXPECT_LE(o.token_ids.size(), 6u);
  }
}

TEST_F(GuidedEngine, RegexOutputsMatchAndSeedsReplay) {
  const std::string re = "[a-z]{2,6}(-[0-9]{1,3})?";
  auto guide = guided::compile_guide({guided::GuideKind::kRegex, re},
                                     guided::TokenVocab::of(llm_->serving_model().tokenizer));
  for (int seed = 0; seed < 10; ++seed) {
    json req = {{"guided_regex", re}, {"temperature", 1.0}, {"seed", seed}, {"max_tokens", 12}};
    auto a = run(req), b = run(req);
    EXPECT_TRUE(guide->matches(a.text)) << a.text;
    EXPECT_EQ(a.finish_reason, "stop");
    EXPECT_EQ(a.text, b.text);
  }
  // Greedy too.
  auto g = run({{"guided_regex", "a{3}"}, {"temperature", 0}, {"max_tokens", 8}});
  EXPECT_EQ(g.text, "aaa");
  EXPECT_EQ(g.finish_reason, "stop");
}

TEST(GuidedSampler, MaskEosAndEmptyMask) {
  SamplingParams sp;
  sp.temperature = 0.f;
  std::vector<float> logits = {5.f, 1.f, 9.f, 2.f, 3.f};  // id 2 (the largest) is EOS
  guided::TokenMask m;
  m.words = {0b01010};  // ids 1 and 3
  m.count = 2;
  const std::vector<int32_t> eos = {2};
  SampleInput in{&sp, {}, {}, {}, nullptr};
  in.guided_mask = &m;
  in.eos_ids = eos;
  std::vector<float> row = logits;
  EXPECT_EQ(Sampler::sample(row, in), 3);  // not accepting: EOS masked
  in.guided_accepting = true;
  row = logits;
  EXPECT_EQ(Sampler::sample(row, in), 2);  // accepting: EOS allowed
  guided::TokenMask empty;
  empty.words = {0};
  in.guided_mask = &empty;
  in.guided_accepting = false;
  row = logits;
  EXPECT_EQ(Sampler::sample(row, in), 2);  // nothing allowed: EOS ends the output
  sp.min_tokens = 3;                       // even with EOS banned, the output ends
  std::vector<int32_t> bans = {2};
  in.suppress_ids = bans;
  row = logits;
  EXPECT_EQ(Sampler::sample(row, in), 2);
  sp.temperature = 1.f;
  std::mt19937_64 rng(1);
  in.rng = &rng;
  in.guided_mask = &m;
  in.suppress_ids = {};
  for (int k = 0; k < 50; ++k) {
    row = logits;
    const int32_t id = Sampler::sample(row, in);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

}  // namespace
}  // namespace pagoda
