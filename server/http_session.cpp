#include "server/http_session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <utility>

#include "server/connection_drain.h"
#include "server/preprocess_pool.h"
#include "server/ws_session.h"

namespace pagoda {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

HttpSession::HttpSession(net::ip::tcp::socket&& socket, const ServerContext& ctx,
                         ConnectionSlot slot)
    : stream_(std::move(socket)), ctx_(ctx), router_(ctx), slot_(std::move(slot)) {}

HttpSession::~HttpSession() {
  if (drain_token_ != 0) ctx_.drain->remove(drain_token_);
}

void HttpSession::start() {
  beast::error_code ignored;
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  if (ctx_.drain) {
    std::weak_ptr<HttpSession> weak = weak_from_this();
    auto executor = stream_.get_executor();
    drain_token_ = ctx_.drain->add([weak, executor] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->on_drain();
      });
    });
  }
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

namespace {
// Beast reads at most max(512, the buffer's free capacity) bytes per system
// call (read_size), 64 KiB at most: through the few-hundred-byte buffer a
// header needs, a 30 MB body took 21,000 recvmsg calls and about a second.
// A body above kLargeBody bytes (or of unknown length) is read with room for
// kBodyReadBytes; the buffer shrinks back before the next request, so an idle
// connection holds no more than its header needed.
constexpr size_t kLargeBody = 16 * 1024;
constexpr size_t kBodyReadBytes = 64 * 1024;
}  // namespace

void HttpSession::do_read() {
  if (buffer_.capacity() > kLargeBody) buffer_.shrink_to_fit();
  parser_.emplace();
  parser_->body_limit(ctx_.limits.max_body_bytes);
  stream_.expires_after(ctx_.limits.idle_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec || parser_->is_done()) return on_read(ec);
  const auto length = parser_->content_length();
  if (!length || *length > kLargeBody) buffer_.reserve(kBodyReadBytes);
  // RFC 9110 10.1.1: a client that sent "Expect: 100-continue" (curl does for
  // bodies over 1 MiB) waits for an interim 100 before the body, or gives up
  // waiting after a second. A body already known to be too large gets its
  // 413 instead.
  const auto& req = parser_->get();
  if (req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue")) {
    if (length && *length > ctx_.limits.max_body_bytes) return on_read(http::error::body_limit);
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    return net::async_write(stream_, net::buffer(kContinue),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->read_body();
                            });
  }
  read_body();
}

void HttpSession::read_body() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void HttpSession::on_read(beast::error_code ec) {
  if (!ec) return handle(parser_->release());
  // Malformed HTTP or a size limit: answer, then close (the byte stream is
  // out of sync). Anything else (EOF, reset, idle timeout): just close.
  if (&ec.category() != &http::make_error_code(http::error::body_limit).category() ||
      ec == http::error::end_of_stream || ec == http::error::partial_message) {
    return close();
  }
  int status = ec == http::error::body_limit ? 413 : ec == http::error::header_limit ? 431 : 400;
  std::string msg = status == 413
                        ? fmt::format("Request body too large (limit {} bytes)", ctx_.limits.max_body_bytes)
                        : fmt::format("Malformed HTTP request: {}", ec.message());
  Response res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = make_error(status, msg).body();
  res.keep_alive(false);
  res.prepare_payload();
  send(std::move(res), /*close=*/true);
}

void HttpSession::handle(Request&& req) {
  // GET /v1/ws with an Upgrade: the connection becomes a WsSession.
  if (ctx_.streams && beast::websocket::is_upgrade(req) &&
      req.target().substr(0, req.target().find('?')) == "/v1/ws") {
    // A refusal of the upgrade: an OpenAI error body, then the connection closes.
    const auto refuse = [&](int code, const std::string& message, bool bearer) {
      http_version_ = req.version();
      keep_alive_ = false;
      RouteResult r = RouteResult::error(make_error(code, message));
      Response res{static_cast<http::status>(code), http_version_};
      res.set(http::field::content_type, r.content_type);
      if (bearer) res.set(http::field::www_authenticate, "Bearer");
      res.body() = std::move(r.body);
      res.keep_alive(false);
      res.prepare_payload();
      send(std::move(res), /*close=*/true);
    };
    // A browser page of another origin (CORS does not cover WebSockets).
    if (!websocket_origin_ok(ctx_.access, req[http::field::origin], req[http::field::host]))
      return refuse(
          403,
          fmt::format("Forbidden: a WebSocket from origin '{}' may not open /v1/ws "
                      "(host '{}'); allowed are pages of this server's own origin and "
                      "the origins of --allowed-origins",
                      std::string(req[http::field::origin]), std::string(req[http::field::host])),
          /*bearer=*/false);
    if (!websocket_access_ok(ctx_.access, req.target(), req[http::field::authorization]))
      return refuse(401,
                    "Unauthorized: /v1/ws needs 'Authorization: Bearer <key>' or the query "
                    "parameter api_key=<key>",
                    /*bearer=*/true);
    upgraded_ = true;
    std::make_shared<WsSession>(std::move(stream_), ctx_, std::move(slot_))->run(std::move(req));
    return;
  }
  http_version_ = req.version();
  keep_alive_ = req.keep_alive();
  // API key and CORS (access_control.h) before routing.
  cors_headers_ = cors_headers(ctx_.access, req[http::field::origin]);
  x_request_id_ = std::string(req["X-Request-Id"]);
  if (ctx_.request_id_headers)
    cors_headers_.emplace_back("X-Request-Id",
                               x_request_id_.empty() ? make_request_id("") : x_request_id_);
  std::optional<RouteResult> denied =
      check_access(ctx_.access, req.method(), req.target(), req[http::field::authorization], req[http::field::origin],
                   req[http::field::access_control_request_headers]);
  if (denied) return respond(std::move(*denied));
  if (ctx_.preprocess && req.method() == http::verb::post) return preprocess(std::move(req));
  respond(router_.route(req.method(), req.target(), req.body(), req[http::field::content_type],
                        x_request_id_));
}

void HttpSession::preprocess(Request&& req) {
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto body = std::make_shared<std::string>(std::move(req.body()));
  auto job = [self = shared_from_this(), executor = stream_.get_executor(), method = req.method(),
              target = std::string(req.target()), body, cancelled, id = x_request_id_,
              content_type = std::string(req[http::field::content_type])] {
    if (cancelled->load())
      return self->ctx_.preprocess->note_dropped();  // the client left while it waited
    RouteResult r = self->router_.route(method, target, *body, content_type, id);
    net::post(executor,
              [self, r = std::move(r)]() mutable { self->on_preprocessed(std::move(r)); });
  };
  if (!ctx_.preprocess->try_submit(std::move(job))) {
    RouteResult r = RouteResult::error(make_error(
        503,
        fmt::format("The server is overloaded: {} requests are already waiting to be preprocessed "
                    "(--max-preprocess-queue); retry later",
                    ctx_.preprocess->max_queued())));
    r.headers.emplace_back("Retry-After", "1");
    return respond(std::move(r));
  }
  preprocessing_ = true;
  preprocess_cancelled_ = std::move(cancelled);
  stream_.expires_never();
  watch_client();
}

void HttpSession::on_preprocessed(RouteResult&& r) {
  preprocessing_ = false;
  preprocess_cancelled_.reset();
  if (client_gone_) {  // closed meanwhile: nothing is submitted
    ctx_.preprocess->note_dropped();
    return;
  }
  if (peer_eof_) {
    keep_alive_ = false;
    if (r.generate) {
      ctx_.preprocess->note_dropped();
      return client_gone("client closed the connection while its request was preprocessed");
    }
  }
  respond(std::move(r));
}

void HttpSession::respond(RouteResult&& r) {
  if (draining_) keep_alive_ = false;
  if (r.generate && draining_) r = RouteResult::error(make_error(503, "The server is shutting down"));
  if (r.generate) return start_generation(std::move(*r.generate));
  Response res{static_cast<http::status>(r.status), http_version_};
  res.set(http::field::content_type, r.content_type);
  for (auto& [k, v] : r.headers) res.set(k, v);
  for (auto& [k, v] : cors_headers_) res.set(k, v);
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive_);
  res.prepare_payload();
  send(std::move(res), !keep_alive_);
}

void HttpSession::send(Response&& res, bool close_after) {
  response_ = std::make_shared<Response>(std::move(res));
  stream_.expires_never();
  http::async_write(stream_, *response_,
                    [self = shared_from_this(), close_after](beast::error_code ec, size_t) {
                      self->response_.reset();
                      if (ec || close_after || self->draining_) return self->close();
                      self->read_next();
                    });
}

void HttpSession::read_next() {
  if (watching_) {  // the read that watched the client during preprocessing
    read_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  do_read();
}

void HttpSession::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

void HttpSession::on_drain() {
  if (upgraded_) return;
  draining_ = true;
  // Idle (waiting for a request, or between keep-alive requests): close now.
  // A request partly received is read to its end and answered (503 for a
  // generation, with Connection: close); a response or stream in progress
  // ends first (send() and end_generation() close when draining_).
  const bool mid_request = parser_ && parser_->got_some() && !group_;
  if (!group_ && !response_ && !writing_ && !mid_request) close();
}

// ---- generation --------------------------------------------------------

void HttpSession::start_generation(ParsedRequest&& parsed) {
  gen_active_ = true;
  client_gone_ = false;
  last_chunk_sent_ = false;
  pending_out_.clear();
  stream_.expires_never();

  std::weak_ptr<HttpSession> weak = weak_from_this();
  auto executor = stream_.get_executor();
  group_ = std::make_unique<GenerationGroup>(std::move(parsed), *ctx_.engine, [weak, executor] {
    net::post(executor, [weak] {
      if (auto self = weak.lock()) self->on_output();
    });
  });
  // Its deltas reach on_output() through the strand, after this returns.
  if (std::optional<SubmitRefusal> refused = group_->submit()) {
    // Nothing was queued (the waiting queue is full): answered here, before
    // any stream header, with Retry-After on a 503.
    group_.reset();
    gen_active_ = false;
    Response res{static_cast<http::status>(refused->error.status), http_version_};
    res.set(http::field::content_type, "application/json");
    if (refused->retry_after_s > 0)
      res.set(http::field::retry_after, std::to_string(refused->retry_after_s));
    for (auto& [k, v] : cors_headers_) res.set(k, v);
    res.body() = refused->error.body();
    res.keep_alive(keep_alive_);
    res.prepare_payload();
    return send(std::move(res), !keep_alive_);
  }
  watch_client();

  const ParsedRequest& req = group_->request();
  if (!req.stream) return;
  formatter_ = std::make_unique<StreamFormatter>(req);
  if (ctx_.limits.stream_send_buffer_bytes > 0) {
    beast::error_code ignored;
    stream_.socket().set_option(net::socket_base::send_buffer_size(ctx_.limits.stream_send_buffer_bytes), ignored);
  }
  chunked_ = http_version_ >= 11;
  if (!chunked_) keep_alive_ = false;
  stream_header_ = std::make_shared<http::response<http::empty_body>>(http::status::ok, http_version_);
  stream_header_->set(http::field::content_type, stream_content_type(req));
  for (auto& [k, v] : cors_headers_) stream_header_->set(k, v);
  stream_header_->set(http::field::cache_control, "no-cache");
  stream_header_->keep_alive(keep_alive_);
  if (chunked_) stream_header_->chunked(true);
  header_sr_ = std::make_shared<http::response_serializer<http::empty_body>>(*stream_header_);
  writing_ = true;
  // The role chunks are formatted now, before any delta (deltas reach
  // on_output on this strand only after this returns): their usage is the
  // request's start (0 completion tokens), however many deltas arrive while
  // the header is written.
  std::string first = formatter_->begin();
  http::async_write_header(stream_, *header_sr_,
                           [self = shared_from_this(), first = std::move(first)](beast::error_code ec, size_t) {
                             self->header_sr_.reset();
                             self->writing_ = false;
                             if (ec) return self->client_gone("header write failed");
                             self->pending_out_.insert(0, first);
                             self->flush_stream();
                           });
}

void HttpSession::watch_client() {
  if (watching_ || client_gone_) return;
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->on_watch(ec, n);
  });
}

void HttpSession::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);  // a pipelined next request: kept for do_read
  if (read_after_watch_) {     // the generation ended and cancelled this read
    read_after_watch_ = false;
    if (ec && ec != net::error::operation_aborted) return close();
    return do_read();
  }
  if (ec == net::error::operation_aborted && client_gone_) return;
  if (ec == net::error::eof && preprocessing_) {
    // Half-closed while its request is preprocessed: a plain response still
    // goes out (then the connection closes); a generation is not started.
    peer_eof_ = true;
    return;
  }
  // The stream's timer (--slow-reader-timeout) fails this read too, often
  // before the pending write: name the cause.
  if (ec == beast::error::timeout)
    return client_gone("slow reader: a write stayed pending past --slow-reader-timeout");
  if (ec) return client_gone("client closed the connection");
  if (buffer_.size() > ctx_.limits.max_pipelined_bytes) return client_gone("client sent too much while waiting");
  if (gen_active_ || writing_ || preprocessing_) watch_client();
}

void HttpSession::on_output() {
  if (!group_ || client_gone_ || !gen_active_) return;  // late deltas (aborts) after the end
  std::vector<ChoiceDelta> deltas = group_->drain();
  if (deltas.empty()) return;
  if (group_->done()) {
    gen_active_ = false;
    if (group_->failed()) group_->abort();  // the other prompts' requests
  }

  if (group_->request().stream) {
    pending_out_ += formatter_->format(deltas);
    return flush_stream();
  }
  if (!group_->done()) return;
  Response res;
  // tool_choice "required" whose output is not a list of calls (cut short):
  // vLLM answers the non-streamed request with a 400.
  const std::string* tool_error = nullptr;
  for (const ChoiceDelta& c : group_->choices())
    if (!c.tool_call_error.empty() && !tool_error) tool_error = &c.tool_call_error;
  if (group_->failed()) {
    OpenAIError e = error_for_output(group_->error());
    res = Response{static_cast<http::status>(e.status), http_version_};
    res.body() = e.body();
  } else if (tool_error) {
    OpenAIError e = bad_request(*tool_error, "tool_choice");
    res = Response{static_cast<http::status>(e.status), http_version_};
    res.body() = e.body();
  } else {
    res = Response{http::status::ok, http_version_};
    res.body() = completion_response(group_->request(), group_->choices())
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  res.set(http::field::content_type, "application/json");
  for (auto& [k, v] : cors_headers_) res.set(k, v);
  if (draining_) keep_alive_ = false;  // shutdown: say so (Connection: close)
  res.keep_alive(keep_alive_);
  res.prepare_payload();
  response_ = std::make_shared<Response>(std::move(res));
  writing_ = true;
  http::async_write(stream_, *response_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->response_.reset();
    if (ec) return self->client_gone("response write failed");
    self->end_generation();
  });
}

void HttpSession::flush_stream() {
  if (writing_ || client_gone_) return;
  auto self = shared_from_this();
  if (!pending_out_.empty()) {
    write_buf_ = std::move(pending_out_);
    pending_out_.clear();
    writing_ = true;
    // A reader too slow for too long: the timeout fails the write (and the
    // client-watch read) and client_gone() aborts the request.
    if (ctx_.limits.slow_reader_timeout.count() > 0) stream_.expires_after(ctx_.limits.slow_reader_timeout);
    auto done = [self](beast::error_code ec, size_t) { self->on_stream_write(ec); };
    if (chunked_) {
      net::async_write(stream_, http::make_chunk(net::buffer(write_buf_)), done);
    } else {
      net::async_write(stream_, net::buffer(write_buf_), done);
    }
    return;
  }
  if (formatter_->done() && !last_chunk_sent_) {
    last_chunk_sent_ = true;
    if (!chunked_) return end_generation();
    writing_ = true;
    net::async_write(stream_, http::make_chunk_last(), [self](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->client_gone("stream write failed");
      self->end_generation();
    });
  }
}

void HttpSession::on_stream_write(beast::error_code ec) {
  writing_ = false;
  stream_.expires_never();
  if (ec == beast::error::timeout) return client_gone("slow reader: a write stayed pending past --slow-reader-timeout");
  if (ec) return client_gone("stream write failed");
  flush_stream();
}

void HttpSession::client_gone(const char* why) {
  if (client_gone_) return;
  client_gone_ = true;
  if (preprocessing_ && preprocess_cancelled_) {
    spdlog::info("Dropped a request being preprocessed: {}", why);
    preprocess_cancelled_->store(true);
  }
  if (gen_active_ && group_) {
    spdlog::info("Aborted request {}: {}", group_->request().request_id, why);
    group_->abort();
    gen_active_ = false;
  }
  close();
}

void HttpSession::end_generation() {
  formatter_.reset();
  group_.reset();
  stream_header_.reset();
  if (client_gone_) return;
  if (!keep_alive_ || draining_) return close();
  read_next();
}

}  // namespace pagoda
