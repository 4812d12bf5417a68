// `pagoda generate` (the real binary, PAGODA_BIN, on the bundled
// stories260K): one JSON line per prompt on stdout, and an exit status that
// says whether every prompt completed.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

struct GenerateRun {
  int exit_status = -1;  // WEXITSTATUS, -1 if it did not exit normally
  std::vector<json> lines;  // stdout, one JSON object a line
  std::string err;          // stderr
};

// Runs `pagoda generate --prompts-file <prompts> <args>`.
GenerateRun run_generate_cli(const std::string& name, const std::vector<std::string>& prompts, const std::string& args) {
  const std::string dir = ::testing::TempDir();
  const std::string pf = dir + "pagoda_generate_" + name + ".txt", out = pf + ".out", err = pf + ".err";
  {
    std::ofstream f(pf);
    for (const std::string& p : prompts) f << p << "\n";
  }
  std::string cmd = std::string(PAGODA_BIN) + " generate --prompts-file '" + pf + "' " + args + " >'" + out +
                    "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  GenerateRun r;
  if (status != -1 && WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  std::istringstream lines(read_text_file(out));
  for (std::string line; std::getline(lines, line);) r.lines.push_back(json::parse(line));
  r.err = read_text_file(err);
  return r;
}

TEST(CliGenerate, EveryPromptCompletedExitsZero) {
  GenerateRun r = run_generate_cli("ok", {"Once upon a time", "The little dog"}, "--max-tokens 4 --temperature 0");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  for (const json& l : r.lines) {
    EXPECT_FALSE(l.contains("error")) << l.dump();
    EXPECT_EQ(l["usage"]["completion_tokens"], 4) << l.dump();
  }
}

TEST(CliGenerate, EveryPromptRejectedExitsNonZeroWithAMessage) {
  GenerateRun r = run_generate_cli("all_rejected", {"Once upon a time", "The little dog"}, "--temperature -1");
  EXPECT_NE(r.exit_status, 0) << r.err;
  EXPECT_NE(r.exit_status, -1) << "did not exit normally";
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  for (const json& l : r.lines) EXPECT_NE(l.value("error", "").find("temperature"), std::string::npos) << l.dump();
  EXPECT_NE(r.err.find("2 of 2 prompt(s) failed"), std::string::npos) << r.err;
}

TEST(CliGenerate, OnePromptRejectedExitsNonZeroAfterTheOthersComplete) {
  // 600 words: longer than stories260K's max_model_len (512) on their own.
  std::string too_long;
  for (int i = 0; i < 600; ++i) too_long += "dog ";
  GenerateRun r = run_generate_cli("one_rejected", {"Once upon a time", too_long}, "--max-tokens 4 --temperature 0");
  EXPECT_NE(r.exit_status, 0) << r.err;
  EXPECT_NE(r.exit_status, -1) << "did not exit normally";
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  EXPECT_EQ(r.lines[0]["usage"]["completion_tokens"], 4) << r.lines[0].dump();
  EXPECT_TRUE(r.lines[1].contains("error")) << r.lines[1].dump();
  EXPECT_NE(r.err.find("1 of 2 prompt(s) failed"), std::string::npos) << r.err;
}


// The CLI runs the server's request pipeline: each line carries what the
// HTTP API answers for the same request (text, ids, finish, usage).
TEST(CliGenerate, EachLineEqualsTheHttpResultOfTheSameRequest) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  GenerateRun r =
      run_generate_cli("as_http", prompts, "--max-tokens 10 --temperature 0 --ignore-eos --logprobs 2");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  PagodaServer server({});
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    json http = post_json(server.port(), "/v1/completions",
                          {{"prompt", prompts[i]},
                           {"max_tokens", 10},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"logprobs", 2},
                           {"return_token_ids", true}});
    const json& c = http["choices"][0];
    const json& l = r.lines[i];
    EXPECT_EQ(l["index"], i);
    EXPECT_EQ(l["prompt"], prompts[i]);
    EXPECT_EQ(l["text"], c["text"]);
    EXPECT_EQ(l["token_ids"], c["token_ids"]);
    EXPECT_EQ(l["finish_reason"], c["finish_reason"]);
    EXPECT_EQ(l["stop_reason"], c["stop_reason"]);
    EXPECT_EQ(l["usage"], http["usage"]);
    ASSERT_TRUE(l.contains("logprobs")) << l.dump();
    EXPECT_EQ(l["logprobs"]["tokens"], c["logprobs"]["tokens"]);
    EXPECT_EQ(l["logprobs"]["text_offset"], c["logprobs"]["text_offset"]);
    ASSERT_EQ(l["logprobs"]["token_logprobs"].size(), 10u);
    for (size_t t = 0; t < 10; ++t)  // one engine run's floats against another's
      EXPECT_NEAR(l["logprobs"]["token_logprobs"][t].get<double>(),
                  c["logprobs"]["token_logprobs"][t].get<double>(), 1e-4);
  }
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// --model (vLLM's flag) is the positional MODEL_DIR; both, differing, is a
// command-line error before anything loads (serve included).
TEST(CliGenerate, ModelFlagIsThePositionalModel) {
  const std::string model = std::string(PAGODA_SOURCE_DIR) + "/models/stories260K";
  GenerateRun r = run_generate_cli("model_flag", {"Once upon a time"},
                                   "--model '" + model + "' --max-tokens 3 --temperature 0");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_EQ(r.lines[0]["usage"]["completion_tokens"], 3) << r.lines[0].dump();

  GenerateRun both = run_generate_cli("model_flag_conflict", {"Once upon a time"},
                                      "'" + model + "' --model /nonexistent/other --max-tokens 3");
  EXPECT_NE(both.exit_status, 0);
  EXPECT_NE(both.exit_status, -1) << "did not exit normally";
  EXPECT_TRUE(both.lines.empty());
  EXPECT_NE(both.err.find("--model"), std::string::npos) << both.err;
  EXPECT_NE(both.err.find("/nonexistent/other"), std::string::npos) << both.err;

  const std::string err = ::testing::TempDir() + "pagoda_serve_model_conflict.err";
  const std::string cmd = std::string(PAGODA_BIN) + " serve /models/a --model /models/b --port 0 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(status != -1 && WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(read_text_file(err).find("differ"), std::string::npos) << read_text_file(err);
}

}  // namespace
}  // namespace pagoda::testing_http
