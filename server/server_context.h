// What the network threads share: the served model (protocol layer), the
// engine handle, and the HTTP limits. Built once at startup; read-only after.
#pragma once
#include <chrono>
#include <cstddef>

#include "server/access_control.h"
#include "server/engine_handle.h"
#include "server/serving_model.h"

namespace pagoda {

struct ServerLimits {
  size_t max_body_bytes = 32u << 20;          // request body; 413 beyond
  std::chrono::seconds idle_timeout{60};       // keep-alive wait for the next request
  size_t max_pipelined_bytes = 1u << 20;       // bytes a client may send while its request runs
};

struct ServerContext {
  ServingModel model;
  EngineHandle* engine = nullptr;  // outlives the server
  ServerLimits limits;
  AccessPolicy access;             // --api-key, --allowed-origins
};

}  // namespace pagoda
