// HttpSession: one client connection (HTTP/1.1, keep-alive), every handler
// on the connection's strand. Reads a request (body limit → 413, malformed →
// 400), routes it, and either writes the response or runs a generation:
//   - submits the GenerateRequest through EngineHandle::add_request with an
//     OutputChannel whose notifier only posts on_output() onto this strand
//     (it holds a weak reference: the engine never keeps a session alive);
//   - streamed: writes the SSE header, then, whenever a write finishes,
//     everything the channel holds goes out as one chunk (coalescing: a slow
//     reader gets bigger chunks, the engine never waits for it);
//   - non-streamed: collects the deltas, writes one JSON response;
//   - while the request runs, a read on the socket watches the client: a
//     closed read side or a write error aborts the request
//     (EngineHandle::abort_request) and closes the connection;
//   - POST bodies are parsed, rendered and tokenized on the PreprocessPool
//     (ServerContext::preprocess), never on this network thread; the
//     client is watched meanwhile (a client that leaves cancels it);
//   - shutdown (ServerContext::drain): an idle connection closes at once; a
//     running generation finishes writing (the engine's stop ends it with an
//     "abort" delta: last chunk, `data: [DONE]`), then the connection closes;
//     a new generation is refused with 503.
#pragma once
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>

#include "engine/output_channel.h"
#include "server/access_control.h"
#include "server/connection_limit.h"
#include "server/generation_group.h"
#include "server/openai_response.h"
#include "server/router.h"
#include "server/server_context.h"

namespace pagoda {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // socket's executor must be a strand (HttpServer accepts onto one).
  // `slot` counts the connection (--max-connections) until the session, or
  // the WsSession it upgrades into, is gone.
  HttpSession(boost::asio::ip::tcp::socket&& socket, const ServerContext& ctx,
              ConnectionSlot slot = {});
  ~HttpSession();
  void start();

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void do_read();
  void on_header(boost::beast::error_code ec);  // the body, read with room for large ones
  void read_body();                             // after the header (and any 100 Continue)
  void on_read(boost::beast::error_code ec);
  void handle(Request&& req);
  // Routes req on the PreprocessPool (a POST that parses, renders or
  // tokenizes); its result comes back through on_preprocessed() on this
  // strand. The pool full: 503 with Retry-After.
  void preprocess(Request&& req);
  void on_preprocessed(RouteResult&& r);
  void respond(RouteResult&& r);  // a generation, or the response written
  void send(Response&& res, bool close);
  void read_next();  // the next request, once a client-watch read is out of the way
  void close();
  void on_drain();  // ConnectionDrain's closer, on this strand

  // Generation.
  void start_generation(ParsedRequest&& parsed);
  void watch_client();
  void on_watch(boost::beast::error_code ec, size_t n);
  void on_output();
  void flush_stream();
  void on_stream_write(boost::beast::error_code ec);
  void client_gone(const char* why);
  void end_generation();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  const ServerContext& ctx_;
  Router router_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<Response> response_;  // the one in flight

  // The running generation, its request and engine requests (valid while
  // gen_active_ or its response is out).
  std::unique_ptr<GenerationGroup> group_;
  std::unique_ptr<StreamFormatter> formatter_;
  HeaderList cors_headers_;   // added to every response of the request (CORS, X-Request-Id)
  std::string x_request_id_;  // the request's X-Request-Id header ("" when absent)
  unsigned http_version_ = 11;
  bool keep_alive_ = true;
  bool chunked_ = true;              // streamed body uses chunked encoding
  bool gen_active_ = false;          // submitted, finished delta not yet seen
  bool watching_ = false;            // the client-watch read is outstanding
  bool read_after_watch_ = false;    // start the next request once the watch read ends
  bool client_gone_ = false;
  // A request is with the PreprocessPool: the client is watched meanwhile;
  // when it leaves, the job is cancelled (skipped if not started) and its
  // result dropped, so nothing reaches the engine.
  bool preprocessing_ = false;
  bool peer_eof_ = false;  // the client half-closed while preprocessing
  std::shared_ptr<std::atomic<bool>> preprocess_cancelled_;
  bool writing_ = false;
  bool last_chunk_sent_ = false;
  std::string pending_out_;          // formatted SSE text not yet written
  std::string write_buf_;            // the SSE text being written
  std::shared_ptr<boost::beast::http::response<boost::beast::http::empty_body>> stream_header_;
  std::shared_ptr<boost::beast::http::response_serializer<boost::beast::http::empty_body>> header_sr_;
  uint64_t drain_token_ = 0;  // 0: not registered
  bool draining_ = false;     // close after the current response
  bool upgraded_ = false;     // the socket went to a WsSession
  ConnectionSlot slot_;       // moves to the WsSession with the socket
};

}  // namespace pagoda
