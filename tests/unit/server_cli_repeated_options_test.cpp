// A repeated option keeps its last value in `pagoda serve` and `pagoda
// generate`, as vLLM's argparse does (CLI11's default was an error: "At
// Most 1 required but received 2"); options that are lists still collect.
// Every occurrence is converted all the same, as argparse converts each: a
// value that is not a number is an error wherever it stands.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/access_control.h"
#include "server/cli.h"
#include "tests/unit/server_cli_test_helpers.h"

namespace pagoda {
namespace {

using Parsed = test::ParsedCli;
const auto parse = test::parse_cli;

TEST(ServerCliRepeated, ServeScalarOptionsKeepTheLastValue) {
  Parsed p;
  parse({"serve",          "--port",  "8001",           "--port",  "8002",
         "--max-num-seqs", "4",       "--max-num-seqs", "8",       "--host",
         "0.0.0.0",        "--host",  "127.0.0.1",      "--seed",  "1",
         "--seed",         "2",       "--dtype",        "float16", "--dtype",
         "float32",        "--model", "/m/a",           "--model", "/m/b"},
        p);
  EXPECT_EQ(p.serve.port, 8002);
  EXPECT_EQ(p.serve.engine.max_num_seqs, 8);
  EXPECT_EQ(p.serve.host, "127.0.0.1");
  EXPECT_EQ(p.serve.engine.seed, 2u);
  EXPECT_EQ(p.serve.engine.dtype, "float32");
  EXPECT_EQ(p.serve.engine.model_dir, "/m/b");
}

TEST(ServerCliRepeated, GenerateScalarOptionsKeepTheLastValue) {
  Parsed p;
  parse({"generate", "--prompt", "a", "--temperature", "0.5", "--temperature", "0", "--max-tokens",
         "3", "--max-tokens", "5", "--output-format", "text", "--output-format", "json",
         "--sampling-params", "{\"n\": 2}", "--sampling-params", "{}"},
        p);
  EXPECT_EQ(p.gen.temperature, 0.0);
  EXPECT_EQ(p.gen.max_tokens, 5);
  EXPECT_EQ(p.gen.output_format, "json");
  EXPECT_EQ(p.gen.sampling_params, "{}");
}

TEST(ServerCliRepeated, ListOptionsStillCollectEveryValue) {
  Parsed p;
  parse({"generate", "--prompt", "a", "--prompt", "b", "--stop", "x", "--stop", "y",
         "--stop-token-ids", "2", "--stop-token-ids", "3"},
        p);
  EXPECT_EQ(p.gen.prompts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.gen.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(p.gen.stop_token_ids, (std::vector<int64_t>{2, 3}));
  Parsed q;
  parse({"serve", "--allowed-origins", "http://a", "--allowed-origins", "http://b"}, q);
  EXPECT_EQ(q.serve.allowed_origins.size(), 2u);
}

// --allowed-origins in vLLM's documented JSON-list form reaches
// parse_allowed_origins whole (CLI11 split a bracketed value at its commas
// and kept the quotes: '["*"]' allowed the origin '"*"', i.e. nothing), as
// does the comma form; repeated flags collect.
TEST(ServerCliRepeated, AllowedOriginsTakeTheJsonListTheCommaFormAndRepeats) {
  const auto origins = [](std::vector<std::string> values) {
    std::vector<std::string> args = {"serve"};
    for (std::string& v : values) {
      args.push_back("--allowed-origins");
      args.push_back(std::move(v));
    }
    Parsed p;
    parse(std::move(args), p);
    return parse_allowed_origins(p.serve.allowed_origins);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(origins({R"(["*"])"}), V{"*"});
  EXPECT_EQ(origins({R"(["https://good.example"])"}), V{"https://good.example"});
  EXPECT_EQ(origins({R"(["https://a.example", "https://b.example"])"}),
            (V{"https://a.example", "https://b.example"}));
  EXPECT_EQ(origins({"https://a.example,https://b.example"}),
            (V{"https://a.example", "https://b.example"}));
  EXPECT_EQ(
      origins({"https://a.example", R"(["https://b.example"])",
               "https://c.example, https://d.example"}),
      (V{"https://a.example", "https://b.example", "https://c.example", "https://d.example"}));
  // --flag=value too.
  Parsed p;
  parse({"serve", R"(--allowed-origins=["https://e.example"])"}, p);
  EXPECT_EQ(parse_allowed_origins(p.serve.allowed_origins), V{"https://e.example"});
}

// What parse_cli throws for `args`, "" when it parses.
std::string parse_error(std::vector<std::string> args) {
  try {
    Parsed p;
    parse(std::move(args), p);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// argparse's "argument --port: invalid int value: 'abc'": an invalid value
// that a later one replaces was dropped silently (`serve --port abc --port
// 8126` served), and one after a valid value was reported with both
// ("Could not convert: --max-tokens = 5,abc").
TEST(ServerCliRepeated, AnInvalidValueIsAnErrorWhereverItStands) {
  EXPECT_EQ(parse_error({"serve", "--port", "abc", "--port", "8126"}),
            "--port: invalid int value: 'abc'");
  EXPECT_EQ(parse_error({"generate", "--max-tokens", "abc", "--max-tokens", "5"}),
            "--max-tokens: invalid int value: 'abc'");
  EXPECT_EQ(parse_error({"generate", "--max-tokens", "5", "--max-tokens", "abc"}),
            "--max-tokens: invalid int value: 'abc'");
  EXPECT_EQ(parse_error({"generate", "--temperature", "warm", "--temperature", "0.5"}),
            "--temperature: invalid float value: 'warm'");
  EXPECT_EQ(parse_error({"serve", "--seed", "1.5", "--seed", "2"}),
            "--seed: invalid int value: '1.5'");
  // A list option checks each of its values.
  EXPECT_EQ(parse_error({"generate", "--stop-token-ids", "2", "--stop-token-ids", "x"}),
            "--stop-token-ids: invalid int value: 'x'");
  // Valid values still parse, read as decimal as Python's int() reads them
  // (CLI11 alone reads "010" as octal).
  Parsed p;
  parse({"serve", "--port", "+8001", "--port", "08002", "--max-num-seqs", "010"}, p);
  EXPECT_EQ(p.serve.port, 8002);
  EXPECT_EQ(p.serve.engine.max_num_seqs, 10);
}

// Every option of both commands that takes numbers (CLI11's INT, UINT and
// FLOAT types: new options included) refuses a non-number in an occurrence
// that a valid one replaces.
TEST(ServerCliRepeated, EveryNumericOptionChecksEachOccurrence) {
  Parsed p;
  CLI::App app{"pagoda"};
  add_serve_command(*app.add_subcommand("serve", ""), p.serve);
  add_generate_command(*app.add_subcommand("generate", ""), p.gen);
  int checked = 0;
  for (const char* command : {"serve", "generate"}) {
    for (const CLI::Option* opt : app.get_subcommand(command)->get_options()) {
      const std::string type = opt->get_type_name();
      const std::string_view base = std::string_view(type).substr(0, type.find(':'));
      if (opt->get_items_expected_max() == 0 || opt->get_lnames().empty()) continue;
      if (base != "INT" && base != "UINT" && base != "FLOAT") continue;
      const std::string flag = "--" + opt->get_lnames().front();
      SCOPED_TRACE(std::string(command) + " " + flag);
      const std::string error = parse_error({command, flag, "x1", flag, "1"});
      if (type.find(":SIZE") != std::string::npos) {
        // --kv-cache-memory's own "256MiB" reader refuses it first.
        EXPECT_EQ(error, flag + ": Value x1 could not be converted to UINT");
      } else {
        const std::string kind = base == "FLOAT" ? "float" : "int";
        EXPECT_EQ(error, flag + ": invalid " + kind + " value: 'x1'");
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);  // serve's and generate's numeric options
}

}  // namespace
}  // namespace pagoda
