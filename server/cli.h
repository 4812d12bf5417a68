// The `pagoda` subcommands (server/main.cpp wires them into CLI11).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/engine_args.h"

namespace CLI {
class App;
}

namespace pagoda {

struct ServeArgs {
  EngineArgs engine;
  std::string host = "0.0.0.0";
  uint16_t port = 8000;  // 0: the OS picks a free port (printed)
  int network_threads = 2;
  std::string api_key;                        // --api-key / PAGODA_API_KEY
  std::vector<std::string> allowed_origins;   // --allowed-origins (CORS)
  std::string web_dir;               // "" → resolve_web_dir's search
  double ws_resume_grace_s = 30.0;   // /v1/ws streams kept after an abrupt disconnect
  double slow_reader_timeout_s = 30.0;
  // Preprocessing (issue 12): the worker pool and the per-request bounds.
  int preprocess_threads = 2;
  int max_preprocess_queue = 128;
  int64_t max_seqs_per_request = 1024;
  int64_t max_chat_messages = 2048;
  double shutdown_timeout_s = 0.0;      // --shutdown-timeout: running requests may finish (vLLM's)
  double engine_hang_timeout_s = 60.0;  // --engine-hang-timeout: /health 503 after a step this long
  size_t max_connections = 0;  // 0: no limit
  bool enable_request_id_headers = false;  // vLLM's: X-Request-Id on every response
};
void add_serve_command(CLI::App& app, ServeArgs& args);
// `pagoda serve`: loads the model, starts the engine and the HTTP server,
// prints `Pagoda listening on http://HOST:PORT` on stdout, runs until
// SIGINT/SIGTERM, then shuts down (docs/operations.md): new generations and
// /health answer 503 while running requests get up to --shutdown-timeout
// seconds to finish; the rest are aborted; connections get 5 s to close.
// Exit status: 0 after a clean shutdown; 1 on a startup or runtime error;
// 128 + signal on a second SIGINT/SIGTERM (immediate); 124 when the
// shutdown overran its hard bound (--shutdown-timeout + 10 s).
int run_serve(ServeArgs args);

struct GenerateArgs {
  EngineArgs engine;
  std::vector<std::string> prompts;
  std::string prompts_file;  // one prompt per line
  // Sampling: absent flags fall back to generation_config.json / vLLM
  // defaults exactly as the API does (the same protocol layer parses them).
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k, min_tokens, sampling_seed;
  std::optional<double> presence_penalty, frequency_penalty, repetition_penalty;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::optional<int64_t> logprobs;  // /v1/completions' logprobs
};
void add_generate_command(CLI::App& app, GenerateArgs& args);
// `pagoda generate`: offline batch generation through the same Engine (no
// server): a progress bar on stderr, one JSON line per prompt on stdout in
// input order: {index, prompt, text, token_ids, logprobs (with --logprobs:
// /v1/completions' object), finish_reason, stop_reason, usage} or {index,
// prompt, error}: the server's request pipeline (GenerationGroup), so each
// line carries what /v1/completions answers for the same request. Returns
// the exit code: 0 when every prompt completed; 1 (after all lines are
// printed, with an error on stderr counting them) when any prompt failed, or
// on a load/engine error; 2 with no prompts.
int run_generate(GenerateArgs args);

}  // namespace pagoda
