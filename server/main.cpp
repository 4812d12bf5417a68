// `pagoda`: the command line (CLI11). `pagoda serve [MODEL_DIR | --model MODEL_DIR] [flags]`
// runs the OpenAI-compatible server, `pagoda generate MODEL_DIR --prompt ...`
// generates offline, `pagoda --version` prints the version. Logs go to
// stderr; stdout carries only the listening line (serve) or JSON lines
// (generate).
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "server/cli.h"
#include "server/version.h"

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("pagoda"));
  CLI::App app{"Pagoda: an LLM serving engine with an OpenAI-compatible API", "pagoda"};
  app.set_version_flag("--version", "pagoda " + pagoda::pagoda_version());
  app.require_subcommand(1);

  pagoda::ServeArgs serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Run the OpenAI-compatible HTTP server");
  pagoda::add_serve_command(*serve_cmd, serve);

  pagoda::GenerateArgs gen;
  CLI::App* gen_cmd = app.add_subcommand("generate", "Generate offline for a batch of prompts (no server)");
  pagoda::add_generate_command(*gen_cmd, gen);

  // "-tp N" (vLLM's alias) is spelled out for CLI11.
  std::vector<std::string> args = pagoda::expand_flag_aliases(argc, argv, pagoda::cli_takes_value(app));
  std::vector<char*> argv2;
  for (std::string& s : args) argv2.push_back(s.data());
  argv2.push_back(nullptr);
  // Usage errors exit 2, as argparse does (vLLM's CLI), not CLI11's own
  // codes (105, 109, ...); --help and --version print and exit 0.
  try {
    app.parse(static_cast<int>(argv2.size()) - 1, argv2.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (serve_cmd->parsed()) return pagoda::run_serve(std::move(serve));
  return pagoda::run_generate(std::move(gen));
}
