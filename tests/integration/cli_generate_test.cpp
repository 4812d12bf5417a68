// `pagoda generate` (the real binary, PAGODA_BIN, on the bundled
// stories260K): one JSON line per prompt on stdout (vLLM's RequestOutput
// shape, server/llm.h), plain or JSON-lines input, per-line errors, the
// progress bar on stderr, and an exit status that says whether every prompt
// completed.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

struct GenerateRun {
  int exit_status = -1;     // WEXITSTATUS, -1 if it did not exit normally
  std::vector<json> lines;  // stdout, one JSON object a line
  std::string err;          // stderr
};

// Runs `pagoda generate --prompts-file <prompts> <args>` (prompts: the
// file's lines). stderr is a file: no terminal.
GenerateRun run_generate_cli(const std::string& name, const std::vector<std::string>& prompts,
                             const std::string& args, bool parse_stdout = true) {
  const std::string dir = ::testing::TempDir();
  const std::string pf = dir + "pagoda_generate_" + name + ".txt", out = pf + ".out",
                    err = pf + ".err";
  {
    std::ofstream f(pf);
    for (const std::string& p : prompts) f << p << "\n";
  }
  std::string cmd = std::string(PAGODA_BIN) + " generate --prompts-file '" + pf + "' " + args +
                    " >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  GenerateRun r;
  if (status != -1 && WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  std::istringstream lines(read_text_file(out));
  for (std::string line; std::getline(lines, line);)
    r.lines.push_back(parse_stdout ? json::parse(line) : json(line));
  r.err = read_text_file(err);
  return r;
}

// Runs `pagoda generate <args>` as given (no --prompts-file added).
GenerateRun run_generate_args(const std::string& name, const std::string& args,
                              bool parse_stdout = true) {
  const std::string base = ::testing::TempDir() + "pagoda_generate_" + name;
  const std::string cmd =
      std::string(PAGODA_BIN) + " generate " + args + " >'" + base + ".out' 2>'" + base + ".err'";
  const int status = std::system(cmd.c_str());
  GenerateRun r;
  if (status != -1 && WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  std::istringstream lines(read_text_file(base + ".out"));
  for (std::string line; std::getline(lines, line);)
    r.lines.push_back(parse_stdout ? json::parse(line) : json(line));
  r.err = read_text_file(base + ".err");
  return r;
}

TEST(CliGenerate, EveryPromptCompletedExitsZero) {
  GenerateRun r = run_generate_cli("ok", {"Once upon a time", "The little dog"},
                                   "--max-tokens 4 --temperature 0");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  for (const json& l : r.lines) {
    EXPECT_FALSE(l.contains("error")) << l.dump();
    EXPECT_EQ(l["outputs"][0]["token_ids"].size(), 4u) << l.dump();
  }
}

TEST(CliGenerate, EveryPromptRejectedExitsOneWithAMessage) {
  GenerateRun r = run_generate_cli("all_rejected",
                                   {R"({"prompt": "Once upon a time", "temperature": -1})",
                                    R"({"prompt": "The little dog", "temperature": -2})"},
                                   "");
  EXPECT_EQ(r.exit_status, 1) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  for (const json& l : r.lines)
    EXPECT_NE(l.value("error", "").find("temperature"), std::string::npos) << l.dump();
  EXPECT_NE(r.err.find("2 of 2 prompt(s) failed"), std::string::npos) << r.err;
}

TEST(CliGenerate, OnePromptRejectedExitsNonZeroAfterTheOthersComplete) {
  // 600 words: longer than stories260K's max_model_len (512) on their own.
  std::string too_long;
  for (int i = 0; i < 600; ++i) too_long += "dog ";
  GenerateRun r = run_generate_cli("one_rejected", {"Once upon a time", too_long},
                                   "--max-tokens 4 --temperature 0");
  EXPECT_NE(r.exit_status, 0) << r.err;
  EXPECT_NE(r.exit_status, -1) << "did not exit normally";
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 4u) << r.lines[0].dump();
  EXPECT_TRUE(r.lines[1].contains("error")) << r.lines[1].dump();
  EXPECT_EQ(r.lines[1]["line"], 2) << r.lines[1].dump();
  EXPECT_NE(r.err.find(":2: This model's maximum context length is 512 tokens"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 of 2 prompt(s) failed"), std::string::npos) << r.err;
}

// The CLI runs the server's request pipeline: each line carries what the
// HTTP API answers for the same request (text, ids, finish, usage).
TEST(CliGenerate, EachLineEqualsTheHttpResultOfTheSameRequest) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  GenerateRun r = run_generate_cli("as_http", prompts,
                                   "--max-tokens 10 --temperature 0 --ignore-eos --logprobs 2");
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
    EXPECT_EQ(l["request_id"], std::to_string(i));
    EXPECT_EQ(l["prompt"].get<std::string>(), prompts[i]);
    EXPECT_EQ(l["prompt_token_ids"].size(), http["usage"]["prompt_tokens"]);
    EXPECT_TRUE(l["finished"].get<bool>());
    const json& o = l["outputs"][0];
    EXPECT_EQ(o["index"], 0);
    EXPECT_EQ(o["text"], c["text"]);
    EXPECT_EQ(o["token_ids"], c["token_ids"]);
    EXPECT_EQ(o["finish_reason"], c["finish_reason"]);
    EXPECT_EQ(o["stop_reason"], c["stop_reason"]);
    ASSERT_EQ(o["logprobs"].size(), 10u) << l.dump();
    double sum = 0;
    for (size_t t = 0; t < 10; ++t) {  // one engine run's floats against another's
      const json& entry = o["logprobs"][t][std::to_string(o["token_ids"][t].get<int>())];
      EXPECT_NEAR(entry["logprob"].get<double>(), c["logprobs"]["token_logprobs"][t].get<double>(),
                  1e-4);
      EXPECT_EQ(entry["decoded_token"], c["logprobs"]["tokens"][t]);
      sum += entry["logprob"].get<double>();
    }
    EXPECT_NEAR(o["cumulative_logprob"].get<double>(), sum, 1e-3);
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
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 3u) << r.lines[0].dump();

  GenerateRun both = run_generate_cli("model_flag_conflict", {"Once upon a time"},
                                      "'" + model + "' --model /nonexistent/other --max-tokens 3");
  EXPECT_NE(both.exit_status, 0);
  EXPECT_NE(both.exit_status, -1) << "did not exit normally";
  EXPECT_TRUE(both.lines.empty());
  EXPECT_NE(both.err.find("--model"), std::string::npos) << both.err;
  EXPECT_NE(both.err.find("/nonexistent/other"), std::string::npos) << both.err;

  const std::string err = ::testing::TempDir() + "pagoda_serve_model_conflict.err";
  const std::string cmd =
      std::string(PAGODA_BIN) + " serve /models/a --model /models/b --port 0 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(status != -1 && WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(read_text_file(err).find("differ"), std::string::npos) << read_text_file(err);
}

// The acceptance test: the greedy reference (llama2.c's run.c,
// shared/testvectors/stories260K_greedy.json) from JSON lines, text and
// token-id prompts, each line with its own max_tokens.
TEST(CliGenerate, JsonLinesReproduceTheGreedyReference) {
  const json ref = read_json_file(shared_path("testvectors/stories260K_greedy.json"));
  std::vector<std::string> lines;
  for (const json& c : ref["cases"]) {
    lines.push_back(json{{"prompt", c["prompt"]}, {"max_tokens", c["greedy_ids"].size()}}.dump());
    lines.push_back(
        json{{"prompt_token_ids", c["prompt_ids"]}, {"max_tokens", c["greedy_ids"].size()}}.dump());
  }
  GenerateRun r = run_generate_cli("greedy_jsonl", lines, "--temperature 0");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), lines.size()) << r.err;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& c = ref["cases"][i / 2];
    SCOPED_TRACE(lines[i]);
    EXPECT_EQ(r.lines[i]["prompt_token_ids"], c["prompt_ids"]);
    EXPECT_EQ(r.lines[i]["outputs"][0]["token_ids"], c["greedy_ids"]);
  }
  // Plain lines (today's input; the empty prompt has no plain line).
  GenerateRun plain = run_generate_cli("greedy_plain", {"Once upon a time", "The little dog"},
                                       "--temperature 0 --max-tokens 100");
  EXPECT_EQ(plain.exit_status, 0) << plain.err;
  ASSERT_EQ(plain.lines.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto want = ref["cases"][i + 1]["greedy_ids"].get<std::vector<int>>();
    want.resize(100);
    EXPECT_EQ(plain.lines[i]["outputs"][0]["token_ids"].get<std::vector<int>>(), want);
  }
}

// A JSON line's chat keeps its key order up to the template, as a Python
// dict handed to vLLM's LLM.chat does (tests/data/offline_tools_reference.json:
// Jinja2's renderings of the tiny Qwen2 chat model's template, tools and
// arguments out of sorted order).
TEST(CliGenerate, ChatLinesKeepTheirKeyOrderForTheTemplate) {
  const nlohmann::ordered_json ref = nlohmann::ordered_json::parse(
      read_text_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/offline_tools_reference.json"));
  std::vector<std::string> lines;
  for (const auto& c : ref["cases"])
    lines.push_back(nlohmann::ordered_json{
        {"messages", c["messages"]}, {"tools", c["tools"]}, {"max_tokens", 1}}
                        .dump());
  GenerateRun r = run_generate_cli("chat_key_order", lines,
                                   "--temperature 0 --device cpu --model '" +
                                       shared_path("models/tiny-random-qwen2-chat") + "'");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), lines.size()) << r.err;
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(r.lines[i]["prompt"], ref["cases"][i]["rendered"].get<std::string>())
        << ref["cases"][i]["name"];
}

TEST(CliGenerate, PerLineSamplingFieldsOverrideTheFlags) {
  GenerateRun r = run_generate_cli(
      "per_line",
      {R"({"prompt": "Once upon a time", "max_tokens": 2})",
       R"({"prompt": "Once upon a time", "n": 2, "temperature": 1.0, "seed": 3, "logprobs": 1})",
       R"({"prompt_token_ids": [1, 403], "stop_token_ids": [407], "max_tokens": 30})"},
      "--max-tokens 5 --temperature 0");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 3u) << r.err;
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 2u);  // the line's max_tokens
  ASSERT_EQ(r.lines[1]["outputs"].size(), 2u);                  // the line's n
  EXPECT_EQ(r.lines[1]["outputs"][1]["index"], 1);
  EXPECT_EQ(r.lines[1]["outputs"][0]["token_ids"].size(), 5u);  // the flag's max_tokens
  EXPECT_EQ(r.lines[1]["outputs"][0]["logprobs"].size(), 5u);
  EXPECT_TRUE(r.lines[0]["outputs"][0]["logprobs"].is_null());
  // Greedy after [BOS, 403] is 407 (the reference's second id): stopped there.
  EXPECT_EQ(r.lines[2]["outputs"][0]["finish_reason"], "stop") << r.lines[2].dump();
  EXPECT_EQ(r.lines[2]["outputs"][0]["stop_reason"], 407) << r.lines[2].dump();
}

// A bad field in one line: that line's output is an error object naming the
// field (stderr names the file's line), the other lines run, the exit
// status is 1.
TEST(CliGenerate, ABadFieldInOneLineNamesTheLineAndField) {
  GenerateRun r = run_generate_cli(
      "bad_field",
      {R"({"prompt": "Once upon a time"})", "", R"({"prompt": "The little dog", "top_p": 2})",
       R"({"prompt": "x", "max_token": 3})", R"({"prompt": )"},
      "--max-tokens 3 --temperature 0");
  EXPECT_EQ(r.exit_status, 1) << r.err;
  ASSERT_EQ(r.lines.size(), 4u) << r.err;
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 3u);
  EXPECT_EQ(r.lines[1]["line"], 3);
  EXPECT_EQ(r.lines[1]["param"], "top_p");
  EXPECT_NE(r.lines[1]["error"].get<std::string>().find("top_p must be in (0, 1]"),
            std::string::npos);
  EXPECT_EQ(r.lines[2]["line"], 4);
  EXPECT_EQ(r.lines[2]["param"], "max_token");
  EXPECT_EQ(r.lines[3]["line"], 5);
  EXPECT_NE(r.lines[3]["error"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_NE(r.err.find(".txt:3: top_p must be in (0, 1], got 2. (field 'top_p')"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(".txt:4: 'max_token' is not a SamplingParams field"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("3 of 4 prompt(s) failed"), std::string::npos) << r.err;
}

// A JSON-lines file whose first line is malformed JSON (a trailing comma) is
// still JSON lines: that line is an error naming the file and line 1 and
// the exit status is 1; it is not read as the plain-text prompt
// `{"prompt": "Once",}`. Plain-text files still read as text.
TEST(CliGenerate, MalformedFirstJsonLineIsItsPromptsErrorNotText) {
  GenerateRun r =
      run_generate_cli("bad_first_line", {R"({"prompt": "Once",})", R"({"prompt": "Hi"})"},
                       "--max-tokens 2 --temperature 0");
  EXPECT_EQ(r.exit_status, 1) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  EXPECT_EQ(r.lines[0]["line"], 1) << r.lines[0].dump();
  EXPECT_NE(r.lines[0].value("error", "").find("not valid JSON"), std::string::npos)
      << r.lines[0].dump();
  EXPECT_NE(r.lines[0].value("error", "").find("--input-format text"), std::string::npos)
      << r.lines[0].dump();
  EXPECT_EQ(r.lines[1]["prompt"], "Hi") << r.lines[1].dump();
  EXPECT_NE(r.err.find("pagoda_generate_bad_first_line.txt:1: the line is not valid JSON"),
            std::string::npos)
      << r.err;
  // The same file as text, asked for: two plain prompts.
  GenerateRun t =
      run_generate_cli("bad_first_line_text", {R"({"prompt": "Once",})", R"({"prompt": "Hi"})"},
                       "--max-tokens 2 --temperature 0 --input-format text");
  EXPECT_EQ(t.exit_status, 0) << t.err;
  ASSERT_EQ(t.lines.size(), 2u) << t.err;
  EXPECT_EQ(t.lines[0]["prompt"], R"({"prompt": "Once",})");
  // Plain text whose later line starts with "{": text (the first line decides).
  GenerateRun p = run_generate_cli("text_then_brace", {"Once upon a time", "{curly} dog"},
                                   "--max-tokens 2 --temperature 0");
  EXPECT_EQ(p.exit_status, 0) << p.err;
  ASSERT_EQ(p.lines.size(), 2u) << p.err;
  EXPECT_EQ(p.lines[1]["prompt"], "{curly} dog");
}

// Every JSON output line carries "index", the prompt's 0-based position in
// the input (--prompt first, then the file), failed ones included: the
// request_id counts only the requests that ran, so after a failed prompt it
// no longer equals the position.
TEST(CliGenerate, EveryOutputLineCarriesItsPromptIndex) {
  GenerateRun r = run_generate_cli(
      "index", {R"({"prompt": "Once", "top_p": 0})", R"({"prompt": "Hi"})", R"({"prompt": "A"})"},
      "--prompt Lily --max-tokens 2 --temperature 0");
  EXPECT_EQ(r.exit_status, 1) << r.err;
  ASSERT_EQ(r.lines.size(), 4u) << r.err;
  for (size_t i = 0; i < r.lines.size(); ++i)
    EXPECT_EQ(r.lines[i]["index"], i) << r.lines[i].dump();
  EXPECT_EQ(r.lines[0]["prompt"], "Lily");
  EXPECT_TRUE(r.lines[1].contains("error")) << r.lines[1].dump();
  EXPECT_EQ(r.lines[2]["prompt"], "Hi");
  EXPECT_EQ(r.lines[3]["prompt"], "A");
  EXPECT_EQ(r.lines[3]["request_id"], "2") << "the third request that ran";
}

TEST(CliGenerate, ChatMessagesUseTheChatTemplate) {
  const std::string tmpl = shared_path("chat_templates/llama-2-chat.jinja");
  GenerateRun r = run_generate_cli(
      "chat",
      {R"({"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 4})"},
      "--temperature 0 --chat-template '" + tmpl + "'");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_NE(r.lines[0]["prompt"].get<std::string>().find("[INST] Tell me a story [/INST]"),
            std::string::npos)
      << r.lines[0].dump();
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 4u);
  // Without a template: that line's error says so.
  GenerateRun none =
      run_generate_cli("chat_none", {R"({"messages": [{"role": "user", "content": "Hi"}]})"}, "");
  EXPECT_EQ(none.exit_status, 1);
  ASSERT_EQ(none.lines.size(), 1u) << none.err;
  EXPECT_EQ(none.lines[0]["param"], "messages");
  EXPECT_NE(none.lines[0]["error"].get<std::string>().find("no chat template"), std::string::npos);
}

// stderr is not a terminal here: only the bar's final line, with vLLM's
// figures; --disable-progress-bar: none.
TEST(CliGenerate, ProgressBarFinalLineOnStderr) {
  GenerateRun r = run_generate_cli("bar", {"Once upon a time", "The little dog", "A cat"},
                                   "--max-tokens 8 --temperature 0 --ignore-eos");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  const std::regex bar(
      R"(Processed prompts: 100%\|(?:█){10}\| 3/3 \[\d\d:\d\d<00:00, +\d+\.\d\d(it/s|s/it), )"
      R"(est\. speed input: \d+\.\d\d toks/s, output: \d+\.\d\d toks/s\]\n)");
  EXPECT_TRUE(std::regex_search(r.err, bar)) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  GenerateRun quiet =
      run_generate_cli("no_bar", {"Once upon a time"}, "--max-tokens 2 --disable-progress-bar");
  EXPECT_EQ(quiet.exit_status, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("Processed prompts"), std::string::npos) << quiet.err;
}

TEST(CliGenerate, TextOutputAndForcedTextInput) {
  // A plain line that looks like JSON is a prompt with --input-format text.
  GenerateRun r =
      run_generate_cli("text_out", {R"({"prompt": "x"})", "Once upon a time"},
                       "--input-format text --output-format text --max-tokens 3 --temperature 0",
                       /*parse_stdout=*/false);
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  EXPECT_EQ(
      r.lines[0].get<std::string>().rfind(R"(Prompt: "{\"prompt\": \"x\"}", Generated text: ")", 0),
      0u)
      << r.lines[0];
  EXPECT_EQ(
      r.lines[1].get<std::string>().rfind(R"(Prompt: "Once upon a time", Generated text: ")", 0),
      0u)
      << r.lines[1];
}

// vLLM's offline LLM refuses only a prompt that fills the context: a
// longer max_tokens generates until max_model_len (stories260K: 512),
// finish_reason "length".
TEST(CliGenerate, MaxTokensPastTheContextStopsAtMaxModelLen) {
  GenerateRun r = run_generate_args("past_context", "--prompt Once --max-tokens 600 --ignore-eos");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  const json& o = r.lines[0];
  EXPECT_EQ(o["prompt_token_ids"].size() + o["outputs"][0]["token_ids"].size(), 512u) << o.dump();
  EXPECT_EQ(o["outputs"][0]["finish_reason"], "length");
}

// Each --prompt / --stop / ... takes one value: a trailing positional is
// MODEL_DIR.
TEST(CliGenerate, RepeatableFlagsTakeOneValueEach) {
  const std::string model = std::string(PAGODA_SOURCE_DIR) + "/models/stories260K";
  GenerateRun r = run_generate_args(
      "one_value", "--prompt Once --stop zzz --stop-token-ids 2 --max-tokens 2 '" + model + "'");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_EQ(r.lines[0]["prompt"], "Once");
  GenerateRun two = run_generate_args("two_prompts", "--prompt Once --prompt Hi --max-tokens 2");
  EXPECT_EQ(two.exit_status, 0) << two.err;
  EXPECT_EQ(two.lines.size(), 2u) << two.err;
}

// A BOM is not part of the first line; token-id prompts have no text (vLLM
// v1's None).
TEST(CliGenerate, ByteOrderMarkIsStrippedAndTokenPromptsHaveNoText) {
  GenerateRun r = run_generate_cli(
      "bom", {"\xEF\xBB\xBF{\"prompt\": \"Once\"}", R"({"prompt_token_ids": [1, 403]})"},
      "--max-tokens 2");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  EXPECT_EQ(r.lines[0]["prompt"], "Once") << r.lines[0].dump();
  EXPECT_TRUE(r.lines[1]["prompt"].is_null()) << r.lines[1].dump();
}

// A failed --prompt gets the documented {"index", "line", "error", "param"}
// (line null: no file), stderr names the same index; text output keeps one
// line per input.
TEST(CliGenerate, FailedPromptLinesAreAlignedAndConsistent) {
  // An id outside stories260K's 512-token vocabulary: checked with the model,
  // per prompt (a flag's value out of every range is a usage error, exit 2).
  GenerateRun r = run_generate_args("prompt_error", "--prompt Once --stop-token-ids 100000");
  EXPECT_EQ(r.exit_status, 1) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_EQ(r.lines[0]["index"], 0);
  EXPECT_TRUE(r.lines[0].contains("line") && r.lines[0]["line"].is_null()) << r.lines[0].dump();
  EXPECT_EQ(r.lines[0]["param"], "stop_token_ids");
  EXPECT_NE(r.err.find("prompt 0, --prompt: stop_token_ids"), std::string::npos) << r.err;
  GenerateRun t =
      run_generate_cli("text_error", {R"({"prompt": "Once", "top_p": 0})", R"({"prompt": "Hi"})"},
                       "--output-format text --max-tokens 2", /*parse_stdout=*/false);
  EXPECT_EQ(t.exit_status, 1) << t.err;
  ASSERT_EQ(t.lines.size(), 2u) << t.err;
  EXPECT_EQ(t.lines[0].get<std::string>().rfind(R"(Prompt: "Once", Error: ")", 0), 0u)
      << t.lines[0];
  EXPECT_EQ(t.lines[1].get<std::string>().rfind(R"(Prompt: "Hi", Generated text: ")", 0), 0u)
      << t.lines[1];
}

// Engine flags out of range say so plainly (not CLI11's "not in range 0 to
// 1.79e308"), by the same check the Python LLM(...) uses.
TEST(CliGenerate, EngineArgRangesAreClear) {
  GenerateRun r = run_generate_args("seqs0", "--prompt Once --max-num-seqs 0");
  EXPECT_EQ(r.exit_status, 2);  // a usage error
  EXPECT_NE(r.err.find("max_num_seqs must be >= 1, got 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("17976931348623157"), std::string::npos) << r.err;
  GenerateRun g = run_generate_args("gpu15", "--prompt Once --gpu-memory-utilization 1.5");
  EXPECT_EQ(g.exit_status, 2);
  EXPECT_NE(g.err.find("gpu_memory_utilization must be in [0, 1], got 1.5"), std::string::npos)
      << g.err;
}

// Exit status: 0 every prompt completed, 1 a prompt failed (above), 2 a
// usage error, reported before the model loads and with nothing on stdout:
// a bad --sampling-params used to exit 1 like a failed prompt, CLI11's own
// errors with its codes (105, 109).
TEST(CliGenerate, UsageErrorsExitTwoBeforeAnythingRuns) {
  const std::string dir = ::testing::TempDir();
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--prompt Once --sampling-params '{bad'", "--sampling-params is not valid JSON"},
      {"--prompt Once --sampling-params '[1]'", "--sampling-params must be a JSON object"},
      {"--prompt Once --sampling-params '{\"temperature\": -1}'",
       "--sampling-params: temperature must be non-negative"},
      {"--prompt Once --sampling-params '{\"max_token\": 3}'",
       "--sampling-params: 'max_token' is not a SamplingParams field"},
      {"--prompt Once --temperature -1", "--temperature: temperature must be non-negative"},
      {"--prompt Once --top-p 2", "--top-p: top_p must be in (0, 1]"},
      {"--prompt Once --best-of 2 --temperature 0",
       "--best-of: best_of must be 1 when using greedy sampling"},
      {"--prompt Once --n 2 --temperature 0", "--n: n must be 1 when using greedy sampling"},
      {"--prompt Once --sampling-params '{\"best_of\": 2}' --temperature 0",
       "--sampling-params: best_of must be 1 when using greedy sampling"},
      {"--prompt Once --logit-bias x", "--logit-bias is not valid JSON"},
      {"--prompts-file '" + dir + "'", "it is a directory"},
      {"--prompts-file /no/such/prompts.txt", "cannot read --prompts-file /no/such/prompts.txt"},
      {"/no/such/model --prompt Once", "model directory '/no/such/model' does not exist"},
      {"--prompt Once --no-such-flag", "--no-such-flag"},
      {"--prompt Once --max-tokens x", "--max-tokens"},
      // argparse converts every occurrence: a bad value that a later one
      // replaces is an error, and one after a good value is named alone.
      {"--prompt Once --max-tokens abc --max-tokens 5", "--max-tokens: invalid int value: 'abc'"},
      {"--prompt Once --max-tokens 5 --max-tokens abc", "--max-tokens: invalid int value: 'abc'"},
      // Out of range: named with the range (vLLM's SamplingParams message
      // for a sampling flag; numpy's seed range for the engine's --seed).
      {"--prompt Once --max-tokens -3", "--max-tokens: max_tokens must be at least 1, got -3"},
      {"--prompt Once --seed -1", "--seed: must be in [0, 4294967295], got -1"},
      {"--prompt Once --max-num-seqs -1", "--max-num-seqs: max_num_seqs must be >= 1, got -1"},
      {"", "no prompts"},
  };
  for (const Case& c : cases) {
    GenerateRun r = run_generate_args("usage", c.args, /*parse_stdout=*/false);
    EXPECT_EQ(r.exit_status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.lines.empty()) << c.args;
  }
  GenerateRun help = run_generate_args("help", "--help", /*parse_stdout=*/false);
  EXPECT_EQ(help.exit_status, 0);
  std::string out;
  for (const json& l : help.lines) out += l.get<std::string>() + "\n";
  EXPECT_NE(out.find("Exit status: 0 every prompt completed; 1 a prompt failed"), std::string::npos)
      << out;
}

// Every SamplingParams check that needs no model runs before the model
// loads (exit 2, the flag named), by the request pipeline's own checks:
// these used to fail each prompt after the load (exit 1). MODEL_DIR is an
// empty directory, so a run that got as far as loading would fail there.
TEST(CliGenerate, ModelIndependentSamplingChecksExitTwoBeforeTheModelLoads) {
  const std::string empty_dir = ::testing::TempDir() + "pagoda_generate_not_a_model";
  std::filesystem::create_directories(empty_dir);
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--stop ''", "--stop: stop cannot contain an empty string."},
      {"--stop a --stop ''", "--stop: stop cannot contain an empty string."},
      {R"(--sampling-params '{"stop": [""]}')",
       "--sampling-params: stop cannot contain an empty string."},
      {"--min-tokens 5 --max-tokens 2",
       "--min-tokens: min_tokens must be less than or equal to max_tokens=2, got 5."},
      {"--min-tokens 20", "--min-tokens: min_tokens must be less than or equal to max_tokens=16"},
      {"--truncate-prompt-tokens 0",
       "--truncate-prompt-tokens: truncate_prompt_tokens must be an integer >= 1 or -1, got 0"},
      {R"(--logit-bias '{"5":200}')", "--logit-bias: logit_bias['5'] must be in [-100, 100]"},
      {R"(--logit-bias '{"x":1}')",
       "--logit-bias: logit_bias keys must be token ids (integers as strings), got 'x'"},
      {R"(--sampling-params '{"logit_bias": {"-1": 1}}')",
       "--sampling-params: logit_bias token id -1 is outside the vocabulary"},
      {R"(--sampling-params '{"allowed_token_ids": []}')",
       "--sampling-params: allowed_token_ids is not None and empty!"},
      {"--swap-space 1e12", "--swap-space: Too large swap space."},
      // vLLM's SamplingParams checks across fields, and max_logprobs.
      {"--n 3 --best-of 2",
       "--best-of: best_of must be greater than or equal to n, got n=3 and best_of=2."},
      {"--best-of 0", "--best-of: best_of must be greater than or equal to n, got n=1"},
      {R"(--sampling-params '{"use_beam_search": true, "temperature": 0.5}')",
       "--sampling-params: temperature must be 0 when using beam search."},
      {R"(--sampling-params '{"use_beam_search": true}' --temperature 0.5)",
       "--temperature: temperature must be 0 when using beam search."},
      {R"(--sampling-params '{"length_penalty": 2}')",
       "--sampling-params: length_penalty is not effective"},
      {R"(--sampling-params '{"use_beam_search": true, "early_stopping": "x"}')",
       "--sampling-params: early_stopping must be true, false or \"never\""},
      {R"(--sampling-params '{"use_beam_search": true, "temperature": 0}' --n 11)",
       "--n: n=11 is too many beams: beam search asks the engine for 2 x 11 = 22"},
      {R"(--sampling-params '{"use_beam_search": true, "temperature": 0}' --max-logprobs 4 --n 3)",
       "--n: n=3 is too many beams"},
      {"--max-logprobs 4 --logprobs 5", "--logprobs: logprobs must be between 0 and 4, got 5"},
      {"--max-logprobs 25", "--max-logprobs: max_logprobs must be in [0, 20], got 25"},
  };
  for (const Case& c : cases) {
    GenerateRun r = run_generate_args("model_free", "'" + empty_dir + "' --prompt Once " + c.args,
                                      /*parse_stdout=*/false);
    EXPECT_EQ(r.exit_status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.lines.empty()) << c.args;
  }
  // A flag mends what --sampling-params alone would get wrong: the merged
  // values are checked (min_tokens 20 with --max-tokens 30).
  GenerateRun ok = run_generate_args(
      "model_free_ok", R"(--prompt Once --sampling-params '{"min_tokens": 20}' --max-tokens 30)");
  EXPECT_EQ(ok.exit_status, 0) << ok.err;
  ASSERT_EQ(ok.lines.size(), 1u) << ok.err;
  EXPECT_GE(ok.lines[0]["outputs"][0]["token_ids"].size(), 20u) << ok.lines[0].dump();
}

// --min-tokens with no --max-tokens is checked against the max_tokens the
// request pipeline gives such a prompt: generation_config.json's
// max_new_tokens (vLLM's default max_tokens from the model's generation
// config), not SamplingParams' 16. Against a model directory whose
// generation_config.json says max_new_tokens 24: --min-tokens 20 runs
// (it exited 2 with "max_tokens=16" before the model loaded), and
// --min-tokens 30 exits 2 naming 24, still before the load (a directory
// with only that file).
TEST(CliGenerate, MinTokensIsCheckedAgainstTheModelsDefaultMaxTokens) {
  namespace fs = std::filesystem;
  const std::string model = ::testing::TempDir() + "pagoda_generate_max_new_tokens_model";
  const std::string config_only = ::testing::TempDir() + "pagoda_generate_max_new_tokens_only";
  fs::remove_all(model);
  fs::remove_all(config_only);
  fs::copy(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", model,
           fs::copy_options::recursive);
  fs::create_directories(config_only);
  for (const std::string& dir : {model, config_only}) {
    std::ofstream f(dir + "/generation_config.json");
    f << R"({"bos_token_id": 1, "eos_token_id": 2, "max_new_tokens": 24})";
  }
  GenerateRun ok = run_generate_args(
      "min_tokens_default_ok", "'" + model + "' --prompt Once --min-tokens 20 --temperature 0");
  EXPECT_EQ(ok.exit_status, 0) << ok.err;
  ASSERT_EQ(ok.lines.size(), 1u) << ok.err;
  const size_t n = ok.lines[0]["outputs"][0]["token_ids"].size();
  EXPECT_GE(n, 20u) << ok.lines[0].dump();
  EXPECT_LE(n, 24u) << ok.lines[0].dump();
  GenerateRun bad = run_generate_args("min_tokens_default_bad",
                                      "'" + config_only + "' --prompt Once --min-tokens 30",
                                      /*parse_stdout=*/false);
  EXPECT_EQ(bad.exit_status, 2) << bad.err;
  EXPECT_NE(bad.err.find("--min-tokens: min_tokens must be less than or equal to max_tokens=24, "
                         "got 30."),
            std::string::npos)
      << bad.err;
  EXPECT_TRUE(bad.lines.empty());
}

// A number beyond double range (1e400) in --sampling-params or
// --logit-bias is a usage error naming the flag and the field (nlohmann's
// out_of_range escaped as "[json.exception.out_of_range.406] ..." and exit
// 1); in a JSON line it is that line's error, and the file is still read as
// JSON lines.
TEST(CliGenerate, NumbersBeyondDoubleRangeAreNamedNotThrown) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {R"(--sampling-params '{"n":1e400}')",
       "--sampling-params has a number beyond the range of a double in 'n'"},
      {R"(--logit-bias '{"5":-1e400}')",
       "--logit-bias has a number beyond the range of a double in '5'"},
      {R"(--sampling-params '{"n":1,"n":2}')", "--sampling-params has the key 'n' twice"},
      {R"(--sampling-params '{"n":')", "--sampling-params is not valid JSON: "},
  };
  for (const Case& c : cases) {
    GenerateRun r =
        run_generate_args("overflow", "--prompt Once " + c.args, /*parse_stdout=*/false);
    EXPECT_EQ(r.exit_status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.lines.empty()) << c.args;
  }
  GenerateRun f = run_generate_cli(
      "overflow_line", {R"({"prompt": "Once", "temperature": 1e400})", R"({"prompt": "Hi"})"},
      "--max-tokens 2");
  EXPECT_EQ(f.exit_status, 1) << f.err;
  ASSERT_EQ(f.lines.size(), 2u) << f.err;
  EXPECT_EQ(f.lines[0]["line"], 1);
  EXPECT_NE(f.lines[0]["error"].get<std::string>().find(
                "has a number beyond the range of a double in 'temperature'"),
            std::string::npos)
      << f.lines[0].dump();
  EXPECT_EQ(f.lines[1]["prompt"], "Hi") << f.lines[1].dump();  // JSON lines, not text
  EXPECT_EQ(f.err.find("json.exception"), std::string::npos) << f.err;
}

// --temperature inf / nan (and any number flag) is refused up front, as
// the Python SamplingParams and the request pipeline refuse it; a large
// finite value is taken (vLLM takes it).
TEST(CliGenerate, NonFiniteSamplingFlagsExitTwo) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--temperature inf", "--temperature: temperature must be a finite number, got inf"},
      {"--temperature nan", "--temperature: temperature must be a finite number, got nan"},
      {"--repetition-penalty inf",
       "--repetition-penalty: repetition_penalty must be a finite number, got inf"},
      {"--presence-penalty -inf",
       "--presence-penalty: presence_penalty must be a finite number, got -inf"},
  };
  for (const Case& c : cases) {
    GenerateRun r =
        run_generate_args("nonfinite", "--prompt Once " + c.args, /*parse_stdout=*/false);
    EXPECT_EQ(r.exit_status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.lines.empty()) << c.args;
  }
  GenerateRun big = run_generate_args("big_temperature",
                                      "--prompt Once --temperature 1e308 "
                                      "--max-tokens 3 --sampling-seed 1");
  EXPECT_EQ(big.exit_status, 0) << big.err;
  ASSERT_EQ(big.lines.size(), 1u) << big.err;
  EXPECT_EQ(big.lines[0]["outputs"][0]["token_ids"].size(), 3u) << big.lines[0].dump();
}

// A MODEL_DIR that is a file is "not a directory", not "does not exist".
TEST(CliGenerate, AModelDirThatIsAFileIsNotADirectory) {
  GenerateRun r = run_generate_args("model_file", "'" PAGODA_SOURCE_DIR "/README.md' --prompt Once",
                                    /*parse_stdout=*/false);
  EXPECT_EQ(r.exit_status, 2) << r.err;
  EXPECT_NE(r.err.find("README.md' is not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("does not exist"), std::string::npos) << r.err;
}

// A guided_json schema in a JSON line or --sampling-params keeps its
// properties' order in the output (the line, parsed as nlohmann::json, had
// them sorted).
TEST(CliGenerate, GuidedSchemaPropertiesComeInTheOrderSent) {
  const std::string schema =
      R"({"type":"object","properties":{"zeta":{"type":"integer","minimum":0,"maximum":9},)"
      R"("alpha":{"type":"boolean"},"mid":{"enum":["x","y"]}},"required":["zeta","alpha","mid"]})";
  const std::string line =
      R"({"prompt":"Once","temperature":0,"max_tokens":100,"guided_whitespace_pattern":"",)"
      R"("guided_json":)" +
      schema + "}";
  GenerateRun r = run_generate_cli("schema_order", {line}, "");
  GenerateRun flag = run_generate_cli(
      "schema_order_flag", {"Once"},
      "--temperature 0 --max-tokens 100 --sampling-params '{\"guided_json\":" + schema + "}'");
  for (const GenerateRun* run : {&r, &flag}) {
    EXPECT_EQ(run->exit_status, 0) << run->err;
    ASSERT_EQ(run->lines.size(), 1u) << run->err;
    const std::string text = run->lines[0]["outputs"][0]["text"];
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"})) << text;
  }
}

// The output line's logprob maps list the most likely token first (they
// came sorted by token id as a string); the Python module reads the same
// JSON into its dicts.
TEST(CliGenerate, LogprobsComeMostLikelyFirst) {
  GenerateRun r = run_generate_cli(
      "logprobs_order", {"Once upon a time"},
      "--max-tokens 8 --temperature 1 --sampling-seed 3 --logprobs 5 --prompt-logprobs 5",
      /*parse_stdout=*/false);
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  const nlohmann::ordered_json out = nlohmann::ordered_json::parse(r.lines[0].get<std::string>());
  auto most_likely_first = [](const nlohmann::ordered_json& position) {
    std::vector<double> v;
    for (auto it = position.begin(); it != position.end(); ++it)
      v.push_back(it.value()["logprob"].get<double>());
    return std::is_sorted(v.begin(), v.end(), std::greater<>());
  };
  const nlohmann::ordered_json& lps = out["outputs"][0]["logprobs"];
  ASSERT_EQ(lps.size(), 8u) << out.dump();
  for (const nlohmann::ordered_json& p : lps) EXPECT_TRUE(most_likely_first(p)) << p.dump();
  const nlohmann::ordered_json& plps = out["prompt_logprobs"];
  ASSERT_GE(plps.size(), 2u) << out.dump();
  for (size_t i = 1; i < plps.size(); ++i)
    EXPECT_TRUE(most_likely_first(plps[i])) << plps[i].dump();
}

// Prompts are UTF-8 text, as vLLM reads them (a Python str; its CLIs read
// files as UTF-8 and fail on an invalid byte): a --prompt or a
// --prompts-file line that is not UTF-8 is a usage error naming it (exit
// 2, nothing run). Such a plain-text prompt used to be generated from, its
// bytes replaced by U+FFFD in the output.
TEST(CliGenerate, PromptsThatAreNotUtf8AreAUsageErrorNamingThem) {
  const std::string pf = ::testing::TempDir() + "pagoda_generate_not_utf8_raw.txt";
  {
    std::ofstream f(pf, std::ios::binary);
    f << "Once upon a time\nThe \xFF dog\n";
  }
  GenerateRun r = run_generate_args("not_utf8_raw", "--prompts-file '" + pf + "' --max-tokens 2",
                                    /*parse_stdout=*/false);
  EXPECT_EQ(r.exit_status, 2) << r.err;
  EXPECT_TRUE(r.lines.empty()) << r.lines.size();
  EXPECT_NE(r.err.find("--prompts-file " + pf + ":2: not valid UTF-8 (byte 5 is 0xFF)"),
            std::string::npos)
      << r.err;
  // A JSON line likewise (the file is read as UTF-8 first).
  const std::string jf = ::testing::TempDir() + "pagoda_generate_not_utf8.jsonl";
  {
    std::ofstream f(jf, std::ios::binary);
    f << "{\"prompt\": \"Once\"}\n{\"prompt\": \"\xC3(\"}\n";
  }
  GenerateRun j = run_generate_args("not_utf8_jsonl", "--prompts-file '" + jf + "'",
                                    /*parse_stdout=*/false);
  EXPECT_EQ(j.exit_status, 2) << j.err;
  EXPECT_NE(j.err.find(jf + ":2: not valid UTF-8 (byte 13 is 0xC3)"), std::string::npos) << j.err;
  // --prompt (printf: /bin/sh has no $'\xff').
  GenerateRun a = run_generate_args("not_utf8_arg",
                                    "--prompt Once --prompt \"$(printf 'a\\377b')\" --max-tokens 2",
                                    /*parse_stdout=*/false);
  EXPECT_EQ(a.exit_status, 2) << a.err;
  EXPECT_TRUE(a.lines.empty());
  EXPECT_NE(a.err.find("--prompt (prompt 1): not valid UTF-8 (byte 2 is 0xFF)"), std::string::npos)
      << a.err;
}

// generation_config.json is read once: the sampling flags are checked
// against its max_new_tokens before the load, and the load takes what was
// read (it read the file again). inotify counts the file's opens.
TEST(CliGenerate, GenerationConfigIsReadOnce) {
  namespace fs = std::filesystem;
  const std::string model = ::testing::TempDir() + "pagoda_generate_read_once_model";
  fs::remove_all(model);
  fs::copy(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", model,
           fs::copy_options::recursive);
  const std::string config = model + "/generation_config.json";
  std::ofstream(config) << R"({"bos_token_id": 1, "eos_token_id": 2, "max_new_tokens": 5})";
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0) << std::strerror(errno);
  // Closes too: the kernel merges an event into an identical one still
  // unread (open, open), not across a close.
  ASSERT_GE(::inotify_add_watch(watch, config.c_str(), IN_OPEN | IN_CLOSE_NOWRITE), 0)
      << std::strerror(errno);
  GenerateRun r = run_generate_args(
      "read_once", "'" + model + "' --prompt Once --min-tokens 5 --ignore-eos --temperature 0");
  // The kernel queued an event per open while the command ran.
  int opens = 0;
  alignas(inotify_event) char buf[4096];
  for (ssize_t n; (n = ::read(watch, buf, sizeof buf)) > 0;)
    for (ssize_t i = 0; i < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + i);
      if (e->mask & IN_OPEN) ++opens;
      i += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  ::close(watch);
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(r.exit_status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  // Its max_new_tokens is the run's default max_tokens.
  EXPECT_EQ(r.lines[0]["outputs"][0]["token_ids"].size(), 5u) << r.lines[0].dump();
  fs::remove_all(model);
}

// `pagoda serve` exits 2 on an invalid or out-of-range value before it
// loads or listens, even when a later occurrence replaces it (it served on
// the last one).
TEST(CliServe, AnInvalidValueAnywhereExitsTwo) {
  const std::string base = ::testing::TempDir() + "pagoda_serve_usage";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--port abc --port 0", "--port: invalid int value: 'abc'"},
      {"--port 70000", "--port: must be in [0, 65535], got 70000"},
      {"--seed -1", "--seed: must be in [0, 4294967295], got -1"},
      {"--tensor-parallel-size 0", "--tensor-parallel-size: tensor_parallel_size must be >= 1"},
      // vLLM's bound: at most 70% of the machine's memory (1e12 GiB was
      // read as a size far past SIZE_MAX).
      {"--swap-space 1e12", "--swap-space: Too large swap space."},
      {"--swap-space 1000000", "--swap-space: Too large swap space. 1000000.00 GiB out of the"},
  };
  for (const Case& c : cases) {
    const std::string cmd =
        std::string(PAGODA_BIN) + " serve " + c.args + " >'" + base + ".out' 2>'" + base + ".err'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << c.args << " " << status;
    EXPECT_EQ(WEXITSTATUS(status), 2) << c.args;
    const std::string err = read_text_file(base + ".err");
    EXPECT_NE(err.find(c.message), std::string::npos) << c.args << "\n" << err;
    EXPECT_EQ(read_text_file(base + ".out"), "") << c.args;  // never listened
  }
}

}  // namespace
}  // namespace pagoda::testing_http
