// guided_grammar through the engine (the offline LLM, the server's request
// pipeline) on tiny-random-qwen2-chat (random weights: unconstrained, it
// writes anything) at temperature 1: 120 bounded grammars (random ones
// equivalent to a Python regex, and a depth-bounded JSON grammar), through
// guided_grammar and structured_outputs.grammar; every output must finish
// "stop", be a sentence of its grammar, and pass Python's re.fullmatch /
// json.loads (tests/support/validate_guided.py). The streamed path is
// tests/integration/serve_guided_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/guided/guide.h"
#include "server/llm.h"
#include "tests/support/grammar_cases.h"
#include "tests/support/guided_cases.h"

namespace pagoda {
namespace {

using nlohmann::json;

TEST(GuidedGrammarEngine, BoundedGrammarsAtTemperatureOneAllParse) {
  if (std::system("python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (validate_guided.py imports it)";
  EngineArgs args;
  args.device = "cpu";
  offline::LLM llm(std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat", args);
  auto vocab = guided::TokenVocab::of(llm.serving_model().tokenizer);
  testing_guided::GrammarRegexGenerator gen(4242, /*bounded=*/true);
  std::vector<testing_guided::GuidedCase> cases;
  std::vector<std::string> grammars;
  std::vector<offline::Prompt> prompts;
  for (int i = 0; i < 120; ++i) {
    testing_guided::GuidedCase c;
    std::string grammar;
    if (i % 4 == 3) {
      grammar = testing_guided::kBoundedJsonGrammar;
      c.kind = "json_value";
      c.spec = "json";
    } else {
      auto [g, re] = gen.next();
      grammar = g;
      c.kind = "regex";
      c.spec = re;
    }
    json req = i % 2 ? json{{"guided_grammar", grammar}}
                     : json{{"structured_outputs", {{"grammar", grammar}}}};
    req["prompt"] = "Answer " + std::to_string(i) + ":";
    req["temperature"] = 1.0;
    req["seed"] = i;
    req["max_tokens"] = 300;  // above every sentence's length in bytes (<= 239)
    prompts.push_back(offline::Prompt::from_json(req));
    cases.push_back(std::move(c));
    grammars.push_back(std::move(grammar));
  }
  auto outs = llm.generate(prompts, std::nullopt, /*use_tqdm=*/false);
  ASSERT_EQ(outs.size(), cases.size());
  std::vector<std::string> texts;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i].outputs.at(0);
    texts.push_back(o.text);
    EXPECT_EQ(o.finish_reason, "stop") << "case " << i << ": '" << o.text << "'";
    auto guide = guided::compile_guide({guided::GuideKind::kGrammar, grammars[i]}, vocab);
    EXPECT_TRUE(guide->matches(o.text)) << "case " << i << ": '" << o.text << "'\n" << grammars[i];
  }
  std::string report;
  const int rc = testing_guided::validate_with_python(
      cases, texts, std::string(PAGODA_BINARY_DIR) + "/guided_grammar_engine_outputs.jsonl",
      std::string(PAGODA_SOURCE_DIR) + "/tests/support/validate_guided.py", &report);
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << report;
}

}  // namespace
}  // namespace pagoda
