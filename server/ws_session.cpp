#include "server/ws_session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "server/connection_drain.h"
#include "server/openai_response.h"
#include "server/preprocess_pool.h"
#include "server/version.h"

namespace pagoda {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace {
// Control messages (errors) a client may leave unread before it is dropped.
constexpr size_t kMaxQueuedControl = 256;
// A message buffer above this is freed once its text is copied out.
constexpr size_t kKeptReadBuffer = 64 * 1024;

// Beast's server timeouts with a 60 s idle limit and keep-alive pings (an
// idle but live client answers them); `handshake` bounds the opening and
// the closing handshake.
websocket::stream_base::timeout ws_timeouts(std::chrono::seconds handshake) {
  websocket::stream_base::timeout t = websocket::stream_base::timeout::suggested(beast::role_type::server);
  t.idle_timeout = std::chrono::seconds(60);
  t.keep_alive_pings = true;
  t.handshake_timeout = handshake;
  return t;
}
}  // namespace

WsSession::WsSession(beast::tcp_stream&& stream, const ServerContext& ctx, ConnectionSlot slot)
    : ws_(std::move(stream)),
      ctx_(ctx),
      slow_timer_(ws_.get_executor()),
      stats_timer_(ws_.get_executor()),
      slot_(std::move(slot)) {}

WsSession::~WsSession() {
  if (drain_token_ != 0) ctx_.drain->remove(drain_token_);
}

void WsSession::run(Request req) {
  beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts apply
  if (ctx_.limits.stream_send_buffer_bytes > 0) {
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().set_option(
        net::socket_base::send_buffer_size(ctx_.limits.stream_send_buffer_bytes), ignored);
  }
  ws_.set_option(ws_timeouts(std::chrono::seconds(30)));
  ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
    res.set(beast::http::field::server, std::string("pagoda/") + pagoda_version());
  }));
  ws_.read_message_max(ctx_.limits.max_body_bytes);
  auto self = shared_from_this();
  // A close frame aborts the socket's requests at once. async_read reports
  // error::closed only after Beast has answered the close, and that answer
  // waits behind a pending write to a client that may no longer read; the
  // control callback sees the frame when it arrives. It runs inside the read
  // operation, so the teardown is posted rather than run there.
  std::weak_ptr<WsSession> weak = self;
  ws_.control_callback([weak](websocket::frame_type kind, beast::string_view) {
    if (kind != websocket::frame_type::close) return;
    if (auto s = weak.lock()) {
      // A write failing after this (error::closed) must not detach the
      // streams as if the connection had been lost.
      s->close_received_ = true;
      net::post(s->ws_.get_executor(), [s] { s->teardown(Teardown::kAbort, "client closed the WebSocket"); });
    }
  });
  ws_.async_accept(req, [self](beast::error_code ec) {
    if (ec) return self->teardown(Teardown::kAbort, "handshake failed");
    self->do_read();
    if (self->ctx_.drain) {
      std::weak_ptr<WsSession> w = self;
      auto executor = self->ws_.get_executor();
      self->drain_token_ = self->ctx_.drain->add([w, executor] {
        net::post(executor, [w] {
          if (auto s = w.lock()) s->on_drain();
        });
      });
    }
  });
}

// ---- reading -----------------------------------------------------------

void WsSession::do_read() {
  reading_ = true;
  ws_.async_read(read_buf_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void WsSession::on_read(beast::error_code ec) {
  reading_ = false;
  if (ec == websocket::error::closed) return teardown(Teardown::kAbort, "client closed the WebSocket");
  // The client broke the protocol (a text message that is not UTF-8: 1007;
  // a malformed frame: 1002) or sent a message over --max-body-bytes (1009):
  // Beast has failed the connection with a close frame saying so. The
  // connection was not lost; the client is done, as after its own close
  // frame: its requests are aborted, nothing is kept for a resume.
  if (ec == websocket::condition::protocol_violation || ec == websocket::error::message_too_big) {
    spdlog::info("/v1/ws: closed the connection: {}", ec.message());
    return teardown(Teardown::kAbort, "the client broke the WebSocket protocol");
  }
  if (ec) return teardown(Teardown::kDetach, "connection lost");
  std::string text = beast::buffers_to_string(read_buf_.data());
  read_buf_.consume(read_buf_.size());
  // A big message's buffer (up to --max-body-bytes, grown by doubling) is
  // freed before the text is parsed, not held beside the parsed copy.
  if (read_buf_.capacity() > kKeptReadBuffer) read_buf_.shrink_to_fit();
  if (!ws_.got_text()) {
    queue_control(ws_error_message(std::nullopt, bad_request("Binary messages are not supported; send JSON text")));
  } else {
    try {
      handle_message(std::move(text));
    } catch (const std::exception& e) {
      spdlog::error("/v1/ws: {}", e.what());
      queue_control(ws_error_message(std::nullopt, make_error(500, fmt::format("Internal server error: {}", e.what()))));
    }
  }
  if (!closed_) do_read();
}

void WsSession::handle_message(std::string text) {
  auto parsed = parse_ws_message(text);
  text = std::string();  // a big message is held once, parsed
  if (auto* err = std::get_if<WsMessageError>(&parsed)) return queue_control(ws_error_message(err->id, err->error));
  WsClientMessage& m = std::get<WsClientMessage>(parsed);
  using T = WsClientMessage::Type;
  switch (m.type) {
    case T::kChat:
    case T::kCompletion: return start_generation(m);
    case T::kCancel: return cancel(m);
    case T::kResume: return resume(m);
    case T::kSubscribeStats: return subscribe_stats(m);
    case T::kUnsubscribeStats:
      stats_subscribed_ = false;
      stats_timer_.cancel();
      return;
  }
}

void WsSession::start_generation(WsClientMessage& m) {
  if (draining_) return queue_control(ws_error_message(m.id, make_error(503, "The server is shutting down")));
  if (!ctx_.preprocess) return submit_generation(m, parse_ws_generation(m, ctx_.model));
  if (preprocessing_.count(m.id))
    return queue_control(ws_error_message(
        m.id,
        make_error(
            409,
            fmt::format("Rejected: id '{}' is already in flight (a running or resumable request); "
                        "that request continues",
                        m.id),
            "id")));
  // Parsing, rendering and tokenizing on the PreprocessPool; the result
  // comes back to this strand. A cancel meanwhile is applied once the
  // request starts (its done says "abort"); a connection closed meanwhile
  // drops it unsubmitted.
  auto msg = std::make_shared<WsClientMessage>(std::move(m));  // its body: moved, not copied
  auto job = [self = shared_from_this(), executor = ws_.get_executor(), msg] {
    if (self->closed_flag_->load())
      return self->ctx_.preprocess->note_dropped();  // the connection is gone
    ParseResult pr = parse_ws_generation(*msg, self->ctx_.model);
    net::post(executor, [self, msg, pr = std::move(pr)]() mutable {
      self->on_preprocessed(*msg, std::move(pr));
    });
  };
  if (!ctx_.preprocess->try_submit(std::move(job)))
    return queue_control(ws_error_message(
        msg->id,
        make_error(503,
                   fmt::format("The server is overloaded: {} requests are already waiting to be "
                               "preprocessed (--max-preprocess-queue); retry later",
                               ctx_.preprocess->max_queued()))));
  preprocessing_[msg->id] = false;
}

void WsSession::on_preprocessed(const WsClientMessage& m, ParseResult&& pr) {
  auto it = preprocessing_.find(m.id);
  const bool cancelled = it != preprocessing_.end() && it->second;
  if (it != preprocessing_.end()) preprocessing_.erase(it);
  if (closed_) return ctx_.preprocess->note_dropped();
  if (draining_ || closing_)
    return queue_control(ws_error_message(m.id, make_error(503, "The server is shutting down")));
  submit_generation(m, std::move(pr));
  if (!cancelled) return;
  if (auto a = attached_.find(m.id); a != attached_.end()) {
    std::lock_guard<std::mutex> lock(a->second.stream->mu);
    a->second.stream->abort_locked();
  }
}

void WsSession::submit_generation(const WsClientMessage& m, ParseResult&& pr) {
  if (auto* err = std::get_if<OpenAIError>(&pr)) return queue_control(ws_error_message(m.id, *err));
  ParsedRequest& parsed = std::get<ParsedRequest>(pr);

  auto s = std::make_shared<WsStream>();
  s->client_id = m.id;
  s->request_id = parsed.request_id;
  s->resumable = m.resumable;
  // Engine thread: only posts onto the owner's strand (whoever owns the
  // stream when the delta arrives: a resume may have moved it).
  std::weak_ptr<WsStream> weak_stream = s;
  auto notify = [weak_stream] {
    auto st = weak_stream.lock();
    if (!st) return;
    std::weak_ptr<WsSession> owner;
    net::any_io_executor ex;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->owner.expired()) return;  // detached: a resume drains it
      owner = st->owner;
      ex = st->owner_executor;
    }
    net::post(ex, [owner, st] {
      if (auto o = owner.lock()) o->on_stream_ready(st);
    });
  };
  // The same pipeline as HTTP: every prompt, n choices each, logprobs, echo.
  s->group = std::make_unique<GenerationGroup>(std::move(parsed), *ctx_.engine, notify);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->owner = weak_from_this();
    s->owner_executor = ws_.get_executor();
  }
  // The new message is rejected; the request already holding the id (on
  // this socket or another, or detached and resumable) is left untouched.
  if (!ctx_.streams->add(s))
    return queue_control(ws_error_message(
        m.id, make_error(409,
                         fmt::format("Rejected: id '{}' is already in flight (a running or resumable request); "
                                     "that request continues",
                                     m.id),
                         "id")));
  attached_[m.id] = Attached{s, 0};
  // Not under s->mu: an engine that rejects a request at once runs the
  // notifier on this thread. The group's channels only reach the group
  // through drain_locked, under the lock.
  if (std::optional<SubmitRefusal> refused = s->group->submit()) {
    // Nothing was queued (the waiting queue is full): the id is free again.
    attached_.erase(m.id);
    ctx_.streams->remove(s);
    queue_control(ws_error_message(m.id, refused->error));
  }
}

void WsSession::cancel(const WsClientMessage& m) {
  if (auto p = preprocessing_.find(m.id); p != preprocessing_.end()) {
    p->second = true;  // aborted as soon as it starts
    return;
  }
  std::shared_ptr<WsStream> s = ctx_.streams->find(m.id);
  if (!s) return queue_control(ws_error_message(m.id, not_found(fmt::format("No request with id '{}'", m.id), "id")));
  bool detached;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    detached = s->owner.expired();
  }
  // Attached (here or elsewhere): the engine's abort deltas end the stream
  // with a done message (finish_reason "abort") on its connection.
  if (detached) return ctx_.streams->abort(s);
  std::lock_guard<std::mutex> lock(s->mu);
  s->abort_locked();
}

void WsSession::resume(const WsClientMessage& m) {
  std::shared_ptr<WsStream> s = ctx_.streams->find(m.id);
  if (!s)
    return queue_control(ws_error_message(
        m.id, not_found(fmt::format("No resumable stream with id '{}' (finished and delivered, cancelled, or its "
                                    "grace period passed)", m.id), "id")));
  int64_t last = 0;
  std::shared_ptr<WsSession> previous;  // another live socket the stream is taken from
  net::any_io_executor previous_executor;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->drain_locked();
    last = static_cast<int64_t>(s->log.size());
    if (m.after <= last) {
      previous = s->owner.lock();
      if (previous.get() == this) previous.reset();
      else if (previous) previous_executor = s->owner_executor;
      s->owner = weak_from_this();
      s->owner_executor = ws_.get_executor();
      s->detached_at = {};
    }
  }
  if (m.after > last)
    return queue_control(ws_error_message(
        m.id, bad_request(fmt::format("'after' ({}) is beyond the stream's last seq ({})", m.after, last), "after")));
  // A takeover (the client reconnected before the server saw its old
  // connection die): the old socket is told, so its client does not wait
  // for a done that will never come there.
  if (previous) net::post(previous_executor, [previous, s] { previous->on_stream_moved(s); });
  attach(s, m.after);
}

void WsSession::attach(const std::shared_ptr<WsStream>& s, int64_t sent_seq) {
  attached_[s->client_id] = Attached{s, sent_seq};
  mark_dirty(s->client_id);
  pump();
}

void WsSession::subscribe_stats(const WsClientMessage& m) {
  stats_interval_ = std::chrono::milliseconds(m.interval_ms);
  stats_before_ = ctx_.engine->stats();
  stats_before_time_ = std::chrono::steady_clock::now();
  if (!stats_subscribed_) {
    stats_subscribed_ = true;
    arm_stats_timer();
  }
}

void WsSession::arm_stats_timer() {
  stats_timer_.expires_after(stats_interval_);
  stats_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_ || !self->stats_subscribed_) return;
    EngineStats now = self->ctx_.engine->stats();
    auto t = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(t - self->stats_before_time_).count();
    self->pending_stats_ = ws_stats_message(now, self->stats_before_, elapsed);  // replaces an unsent one
    self->stats_before_ = std::move(now);
    self->stats_before_time_ = t;
    self->pump();
    self->arm_stats_timer();
  });
}

// ---- writing -----------------------------------------------------------

void WsSession::on_stream_ready(const std::shared_ptr<WsStream>& s) {
  if (closed_) return;
  auto it = attached_.find(s->client_id);
  if (it == attached_.end() || it->second.stream != s) return;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->owner.lock().get() != this) {  // resumed elsewhere
      attached_.erase(it);
      return;
    }
    s->drain_locked();
  }
  mark_dirty(s->client_id);
  pump();
}

void WsSession::on_stream_moved(const std::shared_ptr<WsStream>& s) {
  if (closed_) return;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->owner.lock().get() == this) return;  // resumed back here meanwhile
  }
  auto it = attached_.find(s->client_id);
  if (it != attached_.end() && it->second.stream == s) attached_.erase(it);
  queue_control(ws_error_message(
      s->client_id,
      make_error(409, fmt::format("stream {} was resumed on another connection", s->client_id), "id")));
}

void WsSession::mark_dirty(const std::string& id) {
  if (dirty_set_.insert(id).second) dirty_.push_back(id);
}

void WsSession::queue_control(std::string message) {
  if (closed_) return;
  if (control_.size() >= kMaxQueuedControl) return teardown(Teardown::kAbort, "client does not read its messages");
  control_.push_back(std::move(message));
  pump();
}

std::string WsSession::next_stream_message(const std::string& id) {
  auto it = attached_.find(id);
  if (it == attached_.end()) return {};
  Attached& a = it->second;
  std::shared_ptr<WsStream> s = a.stream;
  std::string msg;
  bool done = false, more = false;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->owner.lock().get() != this) {
      attached_.erase(it);
      return {};
    }
    const int64_t n = static_cast<int64_t>(s->log.size());
    if (a.sent_seq < n) {
      // Everything unsent, up to the first change of choice index, in one
      // message whose seq is the last engine delta it covers.
      ChoiceDelta merged = s->log[static_cast<size_t>(a.sent_seq)];
      int64_t last = a.sent_seq + 1;
      while (last < n && s->log[static_cast<size_t>(last)].index == merged.index)
        append_choice_delta(merged, s->log[static_cast<size_t>(last++)]);
      a.sent_seq = last;
      if (!merged.text.empty() || !merged.token_ids.empty()) msg = ws_delta_message(id, last, merged);
      more = last < n || s->finished;
    } else if (s->finished) {
      const GenerationGroup& g = *s->group;
      msg = g.failed()
                ? ws_error_message(id, error_for_output(g.error()))
                : ws_done_message(id, n, g.choices(), g.prompt_tokens(), g.completion_tokens());
      done = true;
    }
  }
  if (done) {
    attached_.erase(it);
    ctx_.streams->remove(s);
  } else if (more) {
    mark_dirty(id);
  }
  return msg;
}

void WsSession::pump() {
  if (writing_ || closed_ || closing_ || write_failed_) return;
  std::string msg;
  if (!control_.empty()) {
    msg = std::move(control_.front());
    control_.pop_front();
  } else if (pending_stats_) {
    msg = std::move(*pending_stats_);
    pending_stats_.reset();
  } else {
    while (msg.empty() && !dirty_.empty()) {
      std::string id = std::move(dirty_.front());
      dirty_.pop_front();
      dirty_set_.erase(id);
      msg = next_stream_message(id);
    }
  }
  if (msg.empty()) return close_if_drained();
  write_buf_ = std::move(msg);
  writing_ = true;
  const uint64_t gen = ++write_gen_;
  if (ctx_.limits.slow_reader_timeout.count() > 0) {
    slow_timer_.expires_after(ctx_.limits.slow_reader_timeout);
    slow_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || !self->writing_ || self->write_gen_ != gen) return;
      self->teardown(Teardown::kAbort, "slow reader: a write stayed pending past --slow-reader-timeout");
    });
  }
  ws_.text(true);
  ws_.async_write(net::buffer(write_buf_),
                  [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void WsSession::on_write(beast::error_code ec) {
  writing_ = false;
  slow_timer_.cancel();
  if (ec == websocket::error::closed) return teardown(Teardown::kAbort, "client closed the WebSocket");
  if (ec) {
    // The client may have sent a close frame and closed at once: its bytes
    // were read in the same reactor pass, and the read completing next (with
    // an error: the stream has failed) lets teardown see the frame through
    // CloseFrameTap. Without an outstanding read, end now.
    if (reading_ && !closed_) {
      write_failed_ = true;
      return;
    }
    return teardown(Teardown::kDetach, "write failed");
  }
  pump();
}

void WsSession::on_drain() {
  draining_ = true;
  stats_subscribed_ = false;
  stats_timer_.cancel();
  pending_stats_.reset();
  close_if_drained();
}

void WsSession::close_if_drained() {
  if (!draining_ || closed_ || closing_ || writing_ || !attached_.empty() || !control_.empty() ||
      !dirty_.empty() || !preprocessing_.empty())  // its 503 is still to come
    return;
  closing_ = true;
  // A client that does not answer the close frame (it stopped reading) is
  // given a second, not the 30 s of an opening handshake.
  ws_.set_option(ws_timeouts(std::chrono::seconds(1)));
  ws_.async_close(websocket::close_reason(websocket::close_code::going_away, "server shutting down"),
                  [self = shared_from_this()](beast::error_code) {
                    self->teardown(Teardown::kAbort, "server shutting down");
                  });
}

void WsSession::teardown(Teardown mode, const char* why) {
  if (closed_) return;
  closed_ = true;
  closed_flag_->store(true);  // queued preprocessing jobs skip their work
  preprocessing_.clear();
  // A close frame is never a lost connection, however the socket ended.
  if (mode == Teardown::kDetach && (close_received_ || ws_.next_layer().close_frame_seen())) {
    mode = Teardown::kAbort;
    why = "client closed the WebSocket (close frame, then the connection dropped)";
  }
  stats_subscribed_ = false;
  stats_timer_.cancel();
  slow_timer_.cancel();
  const bool grace = ctx_.streams->resume_grace().count() > 0;
  for (auto& [id, a] : attached_) {
    std::shared_ptr<WsStream> s = a.stream;
    bool keep;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->owner.lock().get() != this) continue;  // resumed elsewhere
      keep = mode == Teardown::kDetach && grace && s->resumable;
      s->owner.reset();
      s->detached_at = std::chrono::steady_clock::now();
    }
    if (keep) {
      spdlog::info("Request {} (id '{}') detached: {}; resumable for {} ms", s->request_id, id, why,
                   ctx_.streams->resume_grace().count());
    } else {
      spdlog::info("Aborted request {} (id '{}'): {}", s->request_id, id, why);
      ctx_.streams->abort(s);
    }
  }
  attached_.clear();
  dirty_.clear();
  dirty_set_.clear();
  control_.clear();
  beast::error_code ignored;
  beast::get_lowest_layer(ws_).socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  beast::get_lowest_layer(ws_).socket().close(ignored);
}

}  // namespace pagoda
