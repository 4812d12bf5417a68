// The soak's client coroutines. Each holds one connection at a time (kept
// alive between its requests, reopened after it hangs up on purpose or the
// server closes it) and, until ctx.stop_at, runs scenarios picked at random
// by ctx.weights, recording one outcome per request in ctx.tally.
#pragma once
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>

#include "loadtest/soak/soak_context.h"

namespace pagoda::loadtest {

// HTTP kinds (kSseCompletion … kPartialRequest). Starts after `delay` (the ramp).
boost::asio::awaitable<void> http_client(SoakContext& ctx, uint64_t seed,
                                         std::chrono::milliseconds delay);
// /v1/ws kinds (kWsRequest … kWsOversized).
boost::asio::awaitable<void> ws_client(SoakContext& ctx, uint64_t seed,
                                       std::chrono::milliseconds delay);

}  // namespace pagoda::loadtest
