// `pagoda`: the command line (CLI11). `pagoda serve [MODEL_DIR] [flags]`
// runs the OpenAI-compatible server, `pagoda generate MODEL_DIR --prompt ...`
// generates offline, `pagoda --version` prints the version. Logs go to
// stderr; stdout carries only the listening line (serve) or JSON lines
// (generate).
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

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

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return pagoda::run_serve(std::move(serve));
  return pagoda::run_generate(std::move(gen));
}
