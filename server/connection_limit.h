// ConnectionLimit: --max-connections, the client connections (HTTP
// keep-alive and WebSocket alike) open at once. HttpServer takes a
// ConnectionSlot for every accepted socket and hands it to the session; the
// session holding it (HttpSession, then the WsSession it upgrades into)
// gives it back when it is destroyed. A socket accepted beyond the limit is
// answered 503 (OpenAI error JSON, Retry-After: 1) and closed: the pattern of
// uvicorn's --limit-concurrency, and a status OpenAI clients retry with
// back-off.
//
// Thread-safe (an atomic count): slots are taken on the acceptor's strand
// and given back on any network thread.
#pragma once
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>

namespace pagoda {

class ConnectionLimit;

// One open connection, counted until destroyed. Move-only; an empty slot
// (operator bool false) counts nothing.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionSlot&& o) noexcept : limit_(o.limit_) { o.limit_ = nullptr; }
  ConnectionSlot& operator=(ConnectionSlot&& o) noexcept;
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot() { release(); }
  explicit operator bool() const { return limit_ != nullptr; }

 private:
  friend class ConnectionLimit;
  explicit ConnectionSlot(ConnectionLimit* limit) : limit_(limit) {}
  void release();
  ConnectionLimit* limit_ = nullptr;
};

class ConnectionLimit {
 public:
  // max: connections open at once (0: no limit, slots are still counted).
  explicit ConnectionLimit(size_t max) : max_(max) {}
  // A slot, or an empty one when `max` are open. The limit must outlive
  // its slots.
  ConnectionSlot try_acquire();
  size_t open() const { return open_.load(std::memory_order_relaxed); }
  size_t max() const { return max_; }

 private:
  friend class ConnectionSlot;
  const size_t max_;
  std::atomic<size_t> open_{0};
};

// Answers an over-limit socket: writes "HTTP/1.1 503" with the OpenAI error
// body (code 503, "ServiceUnavailableError", naming --max-connections = max)
// and Connection: close, shuts down its send side, then reads and discards
// what the client sent until it closes or 1 s passes (a lingering close, so
// the client reads the 503 instead of a reset), then closes. `slot` counts
// the socket among the rejections in progress (HttpServer bounds those; one
// beyond that bound is closed without an answer). The socket's executor
// must be a strand.
void reject_over_limit(boost::asio::ip::tcp::socket&& socket, size_t max, ConnectionSlot slot);

}  // namespace pagoda
