// WsSession: one WebSocket connection on /v1/ws (Boost.Beast), every
// handler on the connection's strand. Protocol: docs/WEBSOCKET.md,
// server/ws_protocol.h.
//
//   - Reads client messages continuously; several requests may be in
//     flight on one socket, their delta messages interleaved.
//   - Writes one message at a time. While a write is pending, new engine
//     deltas only land in their stream's log; the next message for a stream
//     covers everything it has not sent yet (coalescing: a slow reader gets
//     fewer, bigger messages; the engine thread never waits for it, and
//     other connections have their own strands).
//   - A write pending longer than ServerLimits::slow_reader_timeout drops
//     the connection and aborts its requests.
//   - Disconnect: a close frame from the client (it left on purpose), a
//     read error with grace period 0, or a stream started with
//     "resumable": false → the requests are aborted at once (freed within
//     one engine step). An abrupt loss (EOF, reset) leaves resumable
//     streams in the StreamHub for the grace period (WsStream). A close
//     frame counts whenever its bytes arrived, even when the client closed
//     the socket right after it and a pending write fails first: a failed
//     write waits for the outstanding read, whose bytes CloseFrameTap
//     checks for the frame.
//   - Resume of a stream attached to another live socket: allowed (the
//     client reconnected before the server saw the old connection die); the
//     stream moves here and the old socket gets a 409 error for its id.
//   - A new request with an id already in flight: a 409 error for that id;
//     the running request is not touched.
//   - Chat/completion messages are parsed, rendered and tokenized on the
//     PreprocessPool (ServerContext::preprocess), not on the network
//     thread; the pool full: a 503 error for the id. A cancel that arrives
//     meanwhile aborts the request as it starts (done, "abort"); a
//     connection that closes meanwhile drops it unsubmitted.
//   - Shutdown (ServerContext::drain): new requests get a 503 error; once
//     every attached stream has sent its done (the engine's stop ends each
//     with finish_reason "abort") and nothing is left to write, the server
//     sends a close frame 1001 "going away" (RFC 6455 section 7.4.1).
#pragma once
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/stats.h"
#include "server/connection_limit.h"
#include "server/server_context.h"
#include "server/ws_close_tap.h"
#include "server/ws_protocol.h"
#include "server/ws_stream.h"

namespace pagoda {

class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  // stream's executor must be a strand; ctx.streams must be set. `slot`
  // counts the connection (--max-connections) until the session is gone.
  WsSession(boost::beast::tcp_stream&& stream, const ServerContext& ctx, ConnectionSlot slot = {});
  ~WsSession();
  // Accepts the upgrade request (answers 101) and starts reading.
  void run(Request req);

 private:
  enum class Teardown { kAbort, kDetach };
  struct Attached {
    std::shared_ptr<WsStream> stream;
    int64_t sent_seq = 0;  // the last seq this connection has sent
  };

  void do_read();
  void on_read(boost::beast::error_code ec);
  void handle_message(std::string text);
  void start_generation(WsClientMessage& m);                         // consumes m.body
  void on_preprocessed(const WsClientMessage& m, ParseResult&& pr);  // back from the PreprocessPool
  void submit_generation(const WsClientMessage& m, ParseResult&& pr);
  void cancel(const WsClientMessage& m);
  void resume(const WsClientMessage& m);
  void subscribe_stats(const WsClientMessage& m);
  void arm_stats_timer();

  // Owner side of a stream's notifier.
  void on_stream_ready(const std::shared_ptr<WsStream>& s);
  // Former owner side of a resume elsewhere: forgets the stream and sends
  // the client a 409 error for its id (unless the stream came back here).
  void on_stream_moved(const std::shared_ptr<WsStream>& s);
  void attach(const std::shared_ptr<WsStream>& s, int64_t sent_seq);
  void mark_dirty(const std::string& id);
  void queue_control(std::string message);
  void pump();
  // The next message for one dirty stream ("" when it had nothing to say).
  std::string next_stream_message(const std::string& id);
  void on_write(boost::beast::error_code ec);
  void teardown(Teardown mode, const char* why);
  void on_drain();                // ConnectionDrain's closer, on this strand
  void close_if_drained();        // the close frame once nothing is left to send

  boost::beast::websocket::stream<CloseFrameTap> ws_;
  const ServerContext& ctx_;
  boost::beast::flat_buffer read_buf_;
  std::unordered_map<std::string, Attached> attached_;
  // Requests on the PreprocessPool, by id → cancelled by the client meanwhile.
  std::unordered_map<std::string, bool> preprocessing_;
  // Set (once, on this strand) when the connection closes; read by jobs.
  std::shared_ptr<std::atomic<bool>> closed_flag_ = std::make_shared<std::atomic<bool>>(false);
  std::deque<std::string> dirty_;              // ids with unsent deltas, FIFO (fair)
  std::unordered_set<std::string> dirty_set_;
  std::deque<std::string> control_;            // errors, sent first
  std::optional<std::string> pending_stats_;   // the latest stats message not yet sent
  std::string write_buf_;
  bool writing_ = false;
  bool closed_ = false;
  bool close_received_ = false;  // the client sent a close frame (control callback)
  bool reading_ = false;         // a read is outstanding
  bool write_failed_ = false;    // a write failed; the outstanding read decides how to end
  bool draining_ = false;        // shutdown: close once nothing is left to send
  bool closing_ = false;         // our close frame is being written
  uint64_t drain_token_ = 0;     // 0: not registered
  uint64_t write_gen_ = 0;
  boost::asio::steady_timer slow_timer_;
  boost::asio::steady_timer stats_timer_;
  bool stats_subscribed_ = false;
  std::chrono::milliseconds stats_interval_{1000};
  EngineStats stats_before_;
  std::chrono::steady_clock::time_point stats_before_time_;
  ConnectionSlot slot_;
};

}  // namespace pagoda
