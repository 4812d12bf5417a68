// The `pagoda` subcommands (server/main.cpp wires them into CLI11).
#pragma once
#include <cstdint>
#include <optional>
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
  int max_preprocess_queue = 65536;  // vLLM has no such bound: a rate-inf benchmark_serving run
                                     // queues every prompt at once
  int64_t max_seqs_per_request = 1024;
  int64_t max_chat_messages = 2048;
  double shutdown_timeout_s = 0.0;      // --shutdown-timeout: running requests may finish (vLLM's)
  double engine_hang_timeout_s = 60.0;  // --engine-hang-timeout: /health 503 after a step this long
  size_t max_connections = 0;  // 0: no limit
  bool enable_request_id_headers = false;  // vLLM's: X-Request-Id on every response
  // Tool calling (vLLM's flags): tool_choice "auto" needs both; the parser
  // ("hermes" | "llama3_json") finds calls in chat output.
  bool enable_auto_tool_choice = false;
  bool enable_prompt_tokens_details = false;  // vLLM's: usage.prompt_tokens_details.cached_tokens
  std::string tool_call_parser;
  // vLLM's --chat-template-content-format: "auto" | "string" | "openai".
  std::string chat_template_content_format = "auto";
  // vLLM's --trust-request-chat-template: accept a request's own template.
  bool trust_request_chat_template = false;
};
void add_serve_command(CLI::App& app, ServeArgs& args);
// `pagoda serve`: loads the model, starts the engine and the HTTP server,
// prints `Pagoda listening on http://HOST:PORT` on stdout, runs until
// SIGINT/SIGTERM, then shuts down (docs/operations.md): new generations and
// /health answer 503 while running requests get up to --shutdown-timeout
// seconds to finish; the rest are aborted; connections get 5 s to close.
// Exit status: 0 after a clean shutdown; 1 on a startup or runtime error;
// 2 for a command-line error (main.cpp, as argparse's);
// 128 + signal on a second SIGINT/SIGTERM (immediate); 124 when the
// shutdown overran its hard bound (--shutdown-timeout + 10 s).
int run_serve(ServeArgs args);

struct GenerateArgs {
  EngineArgs engine;
  std::vector<std::string> prompts;    // --prompt: text prompts
  std::string prompts_file;            // --prompts-file ("-": stdin)
  std::string input_format = "auto";   // auto | text | jsonl
  std::string output_format = "json";  // json | text
  bool disable_progress_bar = false;
  // SamplingParams defaults for every prompt (a JSON line's own fields win).
  // Absent flags fall back to generation_config.json / vLLM defaults exactly
  // as the API does (the same protocol layer parses them).
  std::optional<int64_t> n, best_of, max_tokens, min_tokens, top_k, sampling_seed;
  std::optional<double> temperature, top_p, min_p;
  std::optional<double> presence_penalty, frequency_penalty, repetition_penalty;
  std::vector<std::string> stop, bad_words;
  std::vector<int64_t> stop_token_ids, allowed_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  std::optional<bool> skip_special_tokens, spaces_between_special_tokens;
  std::optional<int64_t> logprobs, prompt_logprobs, truncate_prompt_tokens;
  std::string logit_bias;       // a JSON object {"id": bias}
  std::string sampling_params;  // a JSON object of any SamplingParams fields
};
void add_generate_command(CLI::App& app, GenerateArgs& args);
// `pagoda generate`: offline batch generation on server/llm.h's LLM (the
// server's request pipeline and validation, no HTTP). Input: --prompt TEXT
// (repeatable) and/or --prompts-file FILE of plain lines (one prompt each)
// or JSON lines ({"prompt": str} | {"prompt_token_ids": [int]} |
// {"messages": [...]} plus any SamplingParams field by vLLM's name, and
// LLM.chat's template options); --input-format auto takes JSON lines when
// the file's first non-empty line starts with "{" (then a line that is not
// valid JSON, the first included, is that prompt's error with its line
// number, never a plain-text prompt; --input-format text reads such a file
// as text). Output on stdout, one
// line per prompt in input order: json ({"index": i, the prompt's 0-based
// position in the input (--prompt first, then the file), then vLLM's
// RequestOutput shape, offline::to_json, whose request_id counts only the
// requests that ran) or text ("Prompt: <json string>, Generated text: <json
// string>" per choice, as vLLM's example prints). A prompt that fails
// (a bad field, too long, an engine error) gets the line {"index": i,
// "line": N (its line in the file; absent for --prompt), "error": message,
// "param": field} (text: on stderr only) and the others still run. The
// progress bar (vLLM's, server/progress_bar.h) goes to stderr: redrawn in
// place on a terminal, only its final line otherwise, none with
// --disable-progress-bar. Exit code (also in `pagoda generate --help`): 0
// when every prompt completed; 1 when any failed (after every line is
// written; stderr names each failed prompt's line and field, then counts
// them) or on a load/engine error; 2 for a usage error, before the model
// loads: CLI11's parse errors (main.cpp), sampling flags and
// --sampling-params that vLLM's SamplingParams would refuse
// (check_sampling_fields, naming the flag), --sampling-params /
// --logit-bias not a JSON object, an unreadable --prompts-file (a
// directory included), no prompts, a MODEL_DIR that does not exist.
int run_generate(GenerateArgs args);

}  // namespace pagoda
