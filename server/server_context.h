// What the network threads share: the served model (protocol layer), the
// engine handle, and the HTTP limits. Built once at startup; read-only after.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "server/access_control.h"
#include "server/engine_handle.h"
#include "server/serving_model.h"

namespace pagoda {

struct ServerLimits {
  size_t max_body_bytes = 32u << 20;          // request body; 413 beyond
  std::chrono::seconds idle_timeout{60};       // keep-alive wait for the next request
  size_t max_pipelined_bytes = 1u << 20;       // bytes a client may send while its request runs
  // A streaming client (SSE or WebSocket) whose socket write stays pending
  // this long is dropped and its requests aborted (0: never).
  std::chrono::milliseconds slow_reader_timeout{30000};
  // SO_SNDBUF of streaming connections (SSE, WebSocket): a bounded kernel
  // queue, so a slow reader's backlog stays in the server where it
  // coalesces (and the slow-reader timeout can see it) instead of
  // megabytes of per-token messages in the kernel (0: the OS default,
  // autotuned).
  int stream_send_buffer_bytes = 64 << 10;
  // Client connections open at once (--max-connections); one beyond is
  // answered 503 and closed (0: no limit).
  size_t max_connections = 0;
  // /health answers 503 while a preprocessing job has run this long
  // (--engine-hang-timeout too; 0: never).
  std::chrono::milliseconds preprocess_hang_timeout{60000};
};

class StreamHub;
class ConnectionDrain;
class PreprocessPool;

struct ServerContext {
  ServingModel model;
  EngineHandle* engine = nullptr;  // outlives the server
  ServerLimits limits;
  AccessPolicy access;             // --api-key, --allowed-origins
  StreamHub* streams = nullptr;  // /v1/ws's resumable streams; null: no WebSocket endpoint
  std::string web_dir;           // the chat UI served at / ("" → none)
  ConnectionDrain* drain = nullptr;  // graceful shutdown; null: sessions never drain
  // Parsing, chat rendering and tokenization of POST bodies run here, off
  // the network threads (preprocess_pool.h); null: on the network thread.
  PreprocessPool* preprocess = nullptr;
  // --enable-request-id-headers: every HTTP response carries X-Request-Id
  // (the request's, else 32 random hex digits; vLLM's XRequestIdMiddleware).
  bool request_id_headers = false;
};

}  // namespace pagoda
