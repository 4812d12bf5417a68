// WsStream / StreamHub: the server side of resumable WebSocket streams.
//
// A WsStream is one request started over /v1/ws: its GenerationGroup (the
// request pipeline HTTP uses too: every prompt, n choices each, logprobs,
// echo), and the log of every delta the engine pushed, as choice deltas
// numbered seq = 1, 2, ... (the seq a delta message carries is the number of
// the last engine delta it includes). It is attached to at most one
// WsSession (its owner); the channels' notifier (engine thread) only posts
// the owner's on_stream_ready() onto that session's strand.
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

#include "server/choice_output.h"
#include "server/generation_group.h"
#include "server/ws_protocol.h"

namespace pagoda {

class WsSession;

struct WsStream {
  using Clock = std::chrono::steady_clock;
  std::string client_id;   // the client's "id"
  std::string request_id;  // the engine's (with k > 1 prompts, "<id>-<i>" each)
  bool resumable = true;

  // Guarded by mu (touched by the owner's strand, a resuming session's
  // strand, the sweeper and the engine thread's notifier).
  std::mutex mu;
  std::unique_ptr<GenerationGroup> group;       // set before the stream is shared
  std::weak_ptr<WsSession> owner;               // empty: detached
  boost::asio::any_io_executor owner_executor;  // the owner's strand
  Clock::time_point detached_at{};
  std::vector<ChoiceDelta> log;  // log[seq - 1]: one engine delta each
  // Finished once every choice (prompts x n) has sent its finished delta,
  // or at the first error delta (group->error()).
  bool finished = false;

  // Caller holds mu: moves the group's pending deltas into the log.
  // Empty deltas (no text, no tokens) take a seq too, so seq counts engine
  // deltas exactly. Nothing is logged after the stream finished.
  void drain_locked();
  // Caller holds mu: aborts the engine requests not finished yet.
  void abort_locked();
};

class StreamHub {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StreamHub(std::chrono::milliseconds resume_grace) : grace_(resume_grace) {}

  std::chrono::milliseconds resume_grace() const { return grace_; }
  // False when the client id is already in use (running or resumable).
  bool add(const std::shared_ptr<WsStream>& s);
  std::shared_ptr<WsStream> find(const std::string& client_id) const;
  // Forgets `s` (if it is still the stream registered under its id).
  void remove(const std::shared_ptr<WsStream>& s);
  // Aborts the engine requests (WsStream::abort_locked) and forgets the stream.
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
  std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<WsStream>> streams_;
};

}  // namespace pagoda
