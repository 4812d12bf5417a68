// Issue 17's acceptance test: 1,000 seeded constraints (JSON schemas through
// guided_json / response_format json_schema / structured_outputs.json,
// regexes through guided_regex / structured_outputs.regex, and choice
// lists) run through the engine (the offline LLM, the server's request
// pipeline) on tiny-random-qwen2-chat (random weights: unconstrained, it
// writes anything) at temperature 1; every output must finish "stop" and
// parse and validate under Python's jsonschema / re
// (tests/support/validate_guided.py). The streamed path is
// tests/integration/serve_guided_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/guided/guide.h"
#include "server/llm.h"
#include "tests/support/guided_cases.h"

namespace pagoda {
namespace {

using nlohmann::json;
using testing_guided::CaseGenerator;
using testing_guided::GuidedCase;

guided::GuideSpec spec_of(const GuidedCase& c) {
  if (c.kind == "regex") return {guided::GuideKind::kRegex, c.spec.get<std::string>()};
  if (c.kind == "choice") return {guided::GuideKind::kChoice, c.spec.dump()};
  return {guided::GuideKind::kJson, c.spec.dump()};
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

TEST(GuidedAcceptance, ThousandConstraintsOnTinyRandomQwen2AllValidate) {
  // Run in the Release stage only: under ASan it takes 460 s of CI's time.
  // (The "length" outputs an earlier ASan run showed, cases 194, 604 and 654
  // with empty text, were patterns that match only "": clang built other
  // regexes than GCC, since the generator's draws were operands of one +,
  // and max_tokens 1 left no room past the forced EOS. Both fixed in
  // tests/support/guided_cases.h.)
  if (kAsan) GTEST_SKIP() << "Release stage only (460 s under ASan); see the open defect above";
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/install-deps.sh installs it)";
  EngineArgs args;
  args.device = "cpu";
  offline::LLM llm(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat", args);
  auto vocab = guided::TokenVocab::of(llm.serving_model().tokenizer);

  constexpr int kCases = 1000;
  CaseGenerator gen(20261202);
  std::vector<GuidedCase> cases;
  std::vector<offline::Prompt> prompts;
  int64_t total_bound = 0;
  for (int i = 0; i < kCases; ++i) {
    GuidedCase c = gen.next(i);
    // Every case is bounded: its longest output (bytes >= tokens) is the
    // max_tokens, so "length" can only mean the constraint did not end it.
    const int64_t bound = guided::compile_guide(spec_of(c), vocab)->max_output_bytes();
    ASSERT_GE(bound, 0) << "case " << i << " is unbounded: " << c.spec.dump();
    total_bound += bound;
    // response_format is an HTTP field (the offline SamplingParams has
    // structured_outputs): its cases go as guided_json here.
    json req = c.fields.contains("response_format") ? json{{"guided_json", c.spec}} : c.fields;
    req["prompt"] = "Answer " + std::to_string(i) + ":";
    req["temperature"] = 1.0;
    req["seed"] = i;
    req["max_tokens"] = testing_guided::max_tokens_for_bound(bound);
    prompts.push_back(offline::Prompt::from_json(req));
    cases.push_back(std::move(c));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<offline::RequestOutput> outs =
      llm.generate(prompts, std::nullopt, /*use_tqdm=*/false);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(outs.size(), cases.size());
  std::vector<std::string> texts;
  int64_t tokens = 0;
  int not_stop = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i].outputs.at(0);
    texts.push_back(o.text);
    tokens += static_cast<int64_t>(o.token_ids.size());
    if (o.finish_reason != "stop") {
      ++not_stop;
      ADD_FAILURE() << "case " << i << " finished " << o.finish_reason.value_or("?") << ": '"
                    << o.text << "'";
    }
  }
  std::string report;
  const int rc = testing_guided::validate_with_python(
      cases, texts, std::string(PAGODA_BINARY_DIR) + "/guided_acceptance_outputs.jsonl",
      std::string(PAGODA_SOURCE_DIR) + "/tests/support/validate_guided.py", &report);
  std::printf("%d cases, %lld output tokens (bounds sum %lld bytes), %.1f s, %d not 'stop'\n%s",
              kCases, static_cast<long long>(tokens), static_cast<long long>(total_bound), secs,
              not_stop, report.c_str());
  EXPECT_EQ(rc, 0) << report;
  EXPECT_EQ(not_stop, 0);
}

}  // namespace
}  // namespace pagoda
