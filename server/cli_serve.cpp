#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <future>
#include <optional>
#include <thread>

#include "server/cli.h"
#include "server/cli_checks.h"
#include "server/connection_drain.h"
#include "server/http_server.h"
#include "server/preprocess_pool.h"
#include "server/shutdown_signals.h"
#include "server/version.h"
#include "server/web_assets.h"
#include "server/ws_stream.h"

namespace pagoda {

// How long shutdown waits for open connections to take their last bytes
// (and, on a WebSocket, to answer the close frame) before dropping them.
constexpr std::chrono::milliseconds kShutdownGrace{5000};
// The hard bound on a whole shutdown is --shutdown-timeout plus this: the
// connections' grace above, and time to join the threads.
constexpr std::chrono::milliseconds kShutdownSlack{10000};

void add_serve_command(CLI::App& app, ServeArgs& a) {
  // A repeated option keeps its last value, as vLLM's argparse does
  // (CLI11's default is an error); list options still collect every value.
  // Every occurrence is checked all the same (check_every_occurrence below).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("model_dir", a.engine.model_dir,
                 "Hugging Face model directory (default: bundled stories260K)");
  app.add_option("--host", a.host, "Address to listen on");
  app.add_option("--port", a.port, "Port (0: pick a free one)")->check(cli::int_in(0, 65535));
  app.add_option("--network-threads", a.network_threads, "Threads running the HTTP server")
      ->check(cli::int_in(1, 256));
  app.add_option("--api-key", a.api_key,
                 "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize, /generate")
      ->envname("PAGODA_API_KEY");
  // One value per occurrence, passed whole to parse_allowed_origins: CLI11
  // would otherwise read a value in brackets as its own list syntax and
  // split '["https://a.example"]' into '"https://a.example"' (quotes kept),
  // and take the words after the flag as more values.
  app.add_option("--allowed-origins", a.allowed_origins,
                 "CORS and /v1/ws origins allowed to call the API: a JSON list ('[\"*\"]', "
                 "'[\"https://a.example\"]') or comma-separated; repeatable; default none")
      ->allow_extra_args(false);
  app.add_option("--web-dir", a.web_dir,
                 "Directory of the chat UI served at / (default: the built-in web/)");
  app.add_option(
         "--ws-resume-grace", a.ws_resume_grace_s,
         "Seconds a /v1/ws stream stays resumable after its connection drops (0: abort at once)")
      ->check(cli::float_in(0, 3600));
  app.add_option(
         "--slow-reader-timeout", a.slow_reader_timeout_s,
         "Seconds a streaming write may stay pending before the client is dropped and its requests "
         "aborted (0: never)")
      ->check(cli::float_in(0, 3600));
  app.add_option(
         "--preprocess-threads", a.preprocess_threads,
         "Threads that parse, render chat templates and tokenize requests, off the network threads")
      ->check(cli::int_in(1, 256));
  app.add_option("--max-preprocess-queue", a.max_preprocess_queue,
                 "Requests that may wait for a preprocessing thread; beyond, 503 with Retry-After")
      ->check(cli::int_in(0, 1 << 20));
  app.add_option("--max-seqs-per-request", a.max_seqs_per_request,
                 "Most sequences (prompts x n) one request may ask for; beyond, 400")
      ->check(cli::int_in(1, int64_t{1} << 30));
  app.add_option("--max-chat-messages", a.max_chat_messages,
                 "Most messages one chat may hold; beyond, 400")
      ->check(cli::int_in(1, int64_t{1} << 30));
  app.add_option(
         "--shutdown-timeout", a.shutdown_timeout_s,
         "Seconds running requests may take to finish after SIGTERM/SIGINT before they are aborted "
         "(new requests and /health get 503 meanwhile; 0: abort at once). The whole shutdown is "
         "bounded by this + 10 s; a second signal exits at once")
      ->check(cli::float_in(0, 86400));
  app.add_option(
         "--engine-hang-timeout", a.engine_hang_timeout_s,
         "Seconds the engine may go without completing a step while it has work before /health "
         "answers 503 (0: never)")
      ->check(cli::float_in(0, 86400));
  app.add_option(
         "--max-num-waiting-requests", a.engine.max_num_waiting_requests,
         "Requests that may wait for their first step before new ones get 503 with Retry-After "
         "(a completion with k prompts counts k; 0: no bound)")
      ->check(cli::int_in(0, int64_t{1} << 40));
  app.add_option(
      "--max-connections", a.max_connections,
      "Client connections (HTTP and WebSocket) open at once; one beyond is answered 503 and closed "
      "(0: no limit)");
  app.add_flag("--enable-request-id-headers", a.enable_request_id_headers,
               "Add an X-Request-Id header to every HTTP response: the request's own X-Request-Id, "
               "else a random one (vLLM's flag). A request's X-Request-Id names its completion "
               "(cmpl-<id>, chatcmpl-<id>) with or without this flag, as in vLLM");
  app.add_flag("--enable-auto-tool-choice", a.enable_auto_tool_choice,
               "Let chat requests with tools use tool_choice \"auto\" (the default with tools): "
               "the model decides, and --tool-call-parser finds its calls (vLLM's flag)");
  app.add_flag("--enable-prompt-tokens-details", a.enable_prompt_tokens_details,
               "Add \"prompt_tokens_details\": {\"cached_tokens\": N} to usage: the prompt tokens "
               "read from the prefix cache (vLLM's flag)");
  app.add_option("--tool-call-parser", a.tool_call_parser,
                 "How tool calls are found in chat output: hermes (Qwen2/Qwen2.5's "
                 "<tool_call>{json}</tool_call>) or llama3_json (Llama 3.1's JSON); vLLM's names")
      ->check(CLI::IsMember({"hermes", "llama3_json"}));
  app.add_option("--chat-template-content-format", a.chat_template_content_format,
                 "How message content reaches the chat template (vLLM's flag): string (the text; "
                 "a list of text parts joined with newlines), openai (a list of {\"type\": "
                 "\"text\", \"text\"} parts) or auto (openai when the template loops over a "
                 "message's content, else string; the default)")
      ->check(CLI::IsMember({"auto", "string", "openai"}));
  app.add_flag("--trust-request-chat-template", a.trust_request_chat_template,
               "Accept a chat or /tokenize request's own template (its chat_template, or "
               "chat_template_kwargs.chat_template); without it such a request is refused with "
               "400, as vLLM refuses it (vLLM's flag)");
  add_engine_flags(app, a.engine);
  cli::check_every_occurrence(app);
}

int run_serve(ServeArgs a) {
  try {
    // Before any other thread starts (they inherit the blocked signals).
    ShutdownSignals signals;
    // vLLM serves a model under the name it was given; the bundled default
    // model (no MODEL_DIR) is served as "stories260K".
    if (a.engine.model_dir.empty() && a.engine.served_model_name.empty())
      a.engine.served_model_name = "stories260K";
    a.engine.model_dir = resolve_model_dir(a.engine.model_dir);
    spdlog::info("Pagoda {} serving {}", pagoda_version(), a.engine.model_dir);
    LoadedModel m = load_model(a.engine, UsageContext::kOpenAiApiServer);
    spdlog::info("Model: {} ({}, {} layers, hidden {}), max_model_len {}, served as '{}'",
                 a.engine.model_dir, m.config.architecture, m.config.num_hidden_layers,
                 m.config.hidden_size, m.max_model_len, m.served_model_name);
    spdlog::info("Backend: {}; KV cache: {} blocks of {} tokens ({} tokens)", m.backend,
                 m.engine->num_kv_blocks(), m.engine->block_size(),
                 m.engine->num_kv_blocks() * m.engine->block_size());
    spdlog::info("Chat template: {}",
                 m.chat_template ? (a.engine.chat_template.empty() ? "tokenizer_config.json"
                                                                   : a.engine.chat_template)
                                 : "none (/v1/chat/completions answers 400)");
    auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); };
    EngineAdapter handle(*m.engine, ms(a.engine_hang_timeout_s));
    StreamHub streams(ms(a.ws_resume_grace_s));  // outlives the server
    ServerContext ctx;
    ctx.model = make_serving_model(m, a.engine.model_dir);
    ctx.model.max_seqs_per_request = a.max_seqs_per_request;
    ctx.model.max_chat_messages = a.max_chat_messages;
    ctx.model.chat_template_content_format =
        parse_chat_content_format(a.chat_template_content_format)
            .value_or(ChatContentFormat::kAuto);
    if (m.chat_template && ctx.model.chat_template_content_format == ChatContentFormat::kAuto)
      spdlog::info(
          "Detected the chat template content format to be '{}'. You can set "
          "`--chat-template-content-format` to override this.",
          chat_content_format_name(ctx.model.template_content_format));
    if (a.enable_auto_tool_choice && a.tool_call_parser.empty())
      throw std::runtime_error("--enable-auto-tool-choice requires --tool-call-parser");
    ctx.model.enable_auto_tool_choice = a.enable_auto_tool_choice;
    ctx.model.enable_prompt_tokens_details = a.enable_prompt_tokens_details;
    ctx.model.trust_request_chat_template = a.trust_request_chat_template;
    ctx.model.tool_call_parser =
        tool_parser_from_name(a.tool_call_parser).value_or(ToolParserKind::kNone);
    if (a.enable_auto_tool_choice)
      spdlog::info("Tool calls: tool_choice \"auto\" with the {} parser", a.tool_call_parser);
    ctx.engine = &handle;
    ctx.access.api_key = a.api_key;
    ctx.access.allowed_origins = parse_allowed_origins(a.allowed_origins);
    if (!a.api_key.empty())
      spdlog::info("API key required on /v1/*, /tokenize, /detokenize, /generate");
    ctx.streams = &streams;
    ctx.limits.slow_reader_timeout = ms(a.slow_reader_timeout_s);
    ctx.limits.max_connections = a.max_connections;
    ctx.limits.preprocess_hang_timeout = ms(a.engine_hang_timeout_s);
    ctx.request_id_headers = a.enable_request_id_headers;
    ctx.web_dir = resolve_web_dir(a.web_dir);
    spdlog::info("Chat UI: {}", ctx.web_dir.empty()
                                    ? "none (no web/ directory found; see --web-dir)"
                                    : ctx.web_dir);

    ConnectionDrain drain;
    ctx.drain = &drain;
    PreprocessPool preprocess(static_cast<size_t>(a.preprocess_threads),
                              static_cast<size_t>(a.max_preprocess_queue));
    ctx.preprocess = &preprocess;
    auto server = std::make_unique<HttpServer>(ctx, a.host, a.port, a.network_threads);
    streams.start_sweeper(server->io_context().get_executor(), std::chrono::milliseconds(200));
    m.engine->start();
    handle.set_running(true);
    server->start();
    std::printf("Pagoda listening on http://%s:%u\n", a.host.c_str(),
                static_cast<unsigned>(server->port()));
    std::fflush(stdout);

    signals.wait_first();  // SIGINT / SIGTERM (a second one exits at once)
    ShutdownWatchdog watchdog;
    watchdog.arm(ms(a.shutdown_timeout_s) + kShutdownSlack);
    // Graceful shutdown. 1. No new generations (503; /health 503 too) while
    // the running and queued requests get up to --shutdown-timeout to
    // finish; connections stay open and are still accepted meanwhile.
    handle.set_running(false);
    const auto grace_end = std::chrono::steady_clock::now() + ms(a.shutdown_timeout_s);
    if (a.shutdown_timeout_s > 0) {
      spdlog::info("Draining: running requests have up to {} s to finish", a.shutdown_timeout_s);
      while (!m.engine->idle() && std::chrono::steady_clock::now() < grace_end)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const EngineStats st = m.engine->stats();
      if (!m.engine->idle())
        spdlog::warn(
            "--shutdown-timeout {} s passed with {} request(s) running and {} waiting; aborting "
            "them",
            a.shutdown_timeout_s, st.num_running, st.num_waiting);
    }
    // 2. No new connections; the engine's stop ends every unfinished request
    // with an "abort" delta, which the still-running network threads deliver
    // (SSE: last chunk and [DONE]; WebSocket: done, then close 1001); idle
    // connections close.
    server->stop_accepting();
    drain.begin();
    m.engine->stop();
    if (size_t left = drain.wait_idle(kShutdownGrace))
      spdlog::warn("{} connection(s) still open after {} ms; dropping them", left,
                   kShutdownGrace.count());
    server->stop();
    server->join();
    preprocess.stop();  // queued jobs dropped, running ones (bounded) finished
    m.engine.reset();
    server.reset();
    watchdog.disarm();
    spdlog::info("Shut down cleanly");
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace pagoda
