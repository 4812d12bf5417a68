// What every soak client coroutine shares: where to connect, the model,
// the deadline after which no new scenario starts, per-operation timeouts,
// the tally, and the mix of scenario kinds.
#pragma once
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "loadtest/soak/request_bodies.h"
#include "loadtest/soak/tally.h"

namespace pagoda::loadtest {

struct SoakContext {
  boost::asio::ip::tcp::endpoint endpoint;
  ModelInfo model;
  Tally* tally = nullptr;
  // No scenario starts after this; those running finish (bounded by timeout).
  std::chrono::steady_clock::time_point stop_at;
  // Bound on every connect, write and wait for the next bytes of a response.
  std::chrono::milliseconds timeout{120000};
  uint64_t max_body_bytes = 32u << 20;  // the server's body limit (413 beyond)
  // Relative weights of the scenario kinds (Kind order); 0 disables one.
  std::array<unsigned, static_cast<size_t>(Kind::kCount)> weights{};
  std::string id_prefix;  // makes WebSocket ids unique to this run
  std::atomic<uint64_t> next_id{0};

  std::string new_id() { return id_prefix + std::to_string(next_id.fetch_add(1)); }
};

}  // namespace pagoda::loadtest
