// WsStream / StreamHub: the server side of resumable WebSocket streams.
//
// A WsStream is one request started over /v1/ws: its OutputChannel, and the
// log of every delta the engine pushed, numbered seq = 1, 2, ... (the seq a
// delta message carries is the number of the last engine delta it
// includes). It is attached to at most one WsSession (its owner); the
// channel's notifier (engine thread) only posts the owner's
// on_stream_ready() onto that session's strand.
//
// The StreamHub maps client ids to streams, process-wide (ids are global:
// clients should pick unique ones, e.g. UUIDs). A stream whose connection
// was lost abruptly stays in the hub, detached, for the resume grace period
// (--ws-resume-grace): the engine keeps generating into its log, and a
// `resume` on any connection re-attaches it. When the grace period passes
// unresumed, the sweeper aborts the request and forgets the stream.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "engine/output_channel.h"
#include "server/engine_handle.h"
#include "server/ws_protocol.h"

namespace pagoda {

class WsSession;

struct WsStream {
  using Clock = std::chrono::steady_clock;
  std::string client_id;    // the client's "id"
  std::string request_id;   // the engine's
  bool resumable = true;
  std::shared_ptr<OutputChannel> channel;

  // Guarded by mu (touched by the owner's strand, a resuming session's
  // strand, the sweeper and the engine thread's notifier).
  std::mutex mu;
  std::weak_ptr<WsSession> owner;  // empty: detached
  boost::asio::any_io_executor owner_executor;  // the owner's strand
  Clock::time_point detached_at{};
  std::vector<WsDelta> log;        // log[seq - 1]
  // Finished once every choice (OutputChannel::num_choices) has sent its
  // finished delta, or at the first error delta.
  bool finished = false;
  RequestOutput final_output;      // valid once finished (usage summed over choices, error)
  std::vector<RequestOutput> choice_finals;  // per choice index: its finished delta (no text)
  int num_finished_choices = 0;

  // Caller holds mu: moves the channel's pending deltas into the log.
  // Empty deltas (no text, no tokens) take a seq too, so seq counts engine
  // deltas exactly.
  void drain_locked();
};

class StreamHub {
 public:
  using Clock = std::chrono::steady_clock;
  StreamHub(EngineHandle* engine, std::chrono::milliseconds resume_grace)
      : engine_(engine), grace_(resume_grace) {}

  std::chrono::milliseconds resume_grace() const { return grace_; }
  // False when the client id is already in use (running or resumable).
  bool add(const std::shared_ptr<WsStream>& s);
  std::shared_ptr<WsStream> find(const std::string& client_id) const;
  // Forgets `s` (if it is still the stream registered under its id).
  void remove(const std::shared_ptr<WsStream>& s);
  // Aborts the engine request and forgets the stream.
  void abort(const std::shared_ptr<WsStream>& s);
  // Aborts and forgets every detached stream whose grace period has passed.
  // Returns how many.
  size_t sweep(Clock::time_point now = Clock::now());
  // Sweeps every `period` on `ex` until the executor's context stops.
  void start_sweeper(boost::asio::any_io_executor ex, std::chrono::milliseconds period);
  size_t size() const;
  // Streams kept for a resume (no connection attached).
  size_t num_detached() const;

 private:
  EngineHandle* engine_;
  std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<WsStream>> streams_;
};

}  // namespace pagoda
