// ConnectionDrain: graceful shutdown of the open connections (SIGINT /
// SIGTERM). Every HTTP and WebSocket session registers a closer; on
// begin() each is asked, on its own strand, to finish: an idle keep-alive
// connection closes at once, one with a generation running closes after
// the generation's last bytes (the engine's stop gives every unfinished
// request a final "abort" delta: SSE gets its last chunk and `data: [DONE]`,
// a WebSocket its `done` messages, then a close frame 1001 "going away",
// RFC 6455 section 7.4.1). New generations while draining are refused with
// 503. wait_idle() lets the owner wait, bounded, for the sessions to go.
//
// Thread-safe: add/remove from any network thread, begin/wait_idle from the
// main thread.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace pagoda {

class ConnectionDrain {
 public:
  // Registers a session's closer (it must post to the session's strand and
  // hold only a weak reference). Returns a token for remove(). When the
  // drain has already begun, the closer is called before add returns.
  uint64_t add(std::function<void()> closer);
  // Unregisters (the session's destructor). Unknown tokens are ignored.
  void remove(uint64_t token);
  // True once begin() ran: sessions refuse new generations (503) and close
  // after their current response.
  bool draining() const;
  // Marks draining and calls every registered closer once.
  void begin();
  // Blocks until no session is registered or `timeout` passes; returns how
  // many are left.
  size_t wait_idle(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, std::function<void()>> closers_;
  uint64_t next_ = 1;
  bool draining_ = false;
};

}  // namespace pagoda
