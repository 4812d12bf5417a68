// Parses `pagoda serve ARGS...` / `pagoda generate ARGS...` the way
// server/main.cpp does (the server CLI tests).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "server/cli.h"

namespace pagoda::test {

struct ParsedCli {
  ServeArgs serve;
  GenerateArgs gen;
};

// args without the program name ("serve", "--port", "8001", ...). Throws
// what CLI::App::parse throws.
inline void parse_cli(std::vector<std::string> args, ParsedCli& p) {
  CLI::App app{"pagoda"};
  app.require_subcommand(1);
  add_serve_command(*app.add_subcommand("serve", ""), p.serve);
  add_generate_command(*app.add_subcommand("generate", ""), p.gen);
  args.insert(args.begin(), "pagoda");
  std::vector<const char*> argv;
  for (const auto& s : args) argv.push_back(s.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

}  // namespace pagoda::test
