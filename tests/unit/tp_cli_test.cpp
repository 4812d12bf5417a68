// `-tp N` (vLLM's alias) is spelled out for CLI11 as --tensor-parallel-size,
// and the flag reaches EngineArgs.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "server/engine_args.h"

namespace pagoda {
namespace {

TEST(TpCli, AliasExpandsAndParses) {
  const char* argv[] = {"pagoda", "serve", "-tp", "2", "--device", "cpu", "-tp=4", "--", "-tp"};
  const auto never = [](const std::string&) { return false; };
  const auto out = expand_flag_aliases(9, argv, never);
  EXPECT_EQ(out, (std::vector<std::string>{"pagoda", "serve", "--tensor-parallel-size", "2", "--device", "cpu",
                                           "--tensor-parallel-size=4", "--", "-tp"}));

  CLI::App app;
  EngineArgs a;
  add_engine_flags(app, a);
  const char* args2[] = {"pagoda", "-tp", "2"};
  auto expanded = expand_flag_aliases(3, args2, cli_takes_value(app));
  std::vector<char*> v;
  for (auto& s : expanded) v.push_back(s.data());
  app.parse(static_cast<int>(v.size()), v.data());
  EXPECT_EQ(a.tensor_parallel_size, 2);
}

// An option's value that happens to read "-tp" stays as given.
TEST(TpCli, AValueSpelledLikeTheAliasIsNotExpanded) {
  CLI::App app;
  EngineArgs a;
  add_engine_flags(app, a);
  std::string name;
  app.add_option("--label", name);
  bool flag = false;
  app.add_flag("--some-flag", flag);
  const char* argv[] = {"pagoda", "--label", "-tp", "--some-flag", "-tp", "2"};
  const auto out = expand_flag_aliases(6, argv, cli_takes_value(app));
  EXPECT_EQ(out, (std::vector<std::string>{"pagoda", "--label", "-tp", "--some-flag",
                                           "--tensor-parallel-size", "2"}));
  std::vector<std::string> copy = out;
  std::vector<char*> v;
  for (auto& s : copy) v.push_back(s.data());
  app.parse(static_cast<int>(v.size()), v.data());
  EXPECT_EQ(name, "-tp");
  EXPECT_EQ(a.tensor_parallel_size, 2);
}

}  // namespace
}  // namespace pagoda
