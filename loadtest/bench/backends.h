// The request side of the benchmark: one request per connection (as
// vLLM's benchmark opens an aiohttp session per request), streamed, timed
// on the client's steady clock. Backends:
//   openai       POST --endpoint (/v1/completions), `prompt` (text, or the
//                token ids with --prompt-token-ids), SSE;
//   openai-chat  POST --endpoint (/v1/chat/completions), one user message
//                with the prompt as a text content part, SSE;
//   pagoda-ws    Pagoda's /v1/ws (docs/WEBSOCKET.md): one `completion`
//                message on its own WebSocket, read to its `done`.
// Every request asks for temperature 0, max_tokens = the sample's output
// length, stream_options.include_usage (the server's token count), and
// ignore_eos when asked. Failures (refused connection, non-200 status, an
// error event, a stream cut short, the request's deadline passing) are
// results, never thrown.
#pragma once
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "loadtest/bench/dataset.h"
#include "loadtest/bench/metrics.h"

namespace pagoda::bench {

enum class Backend { kOpenAI, kOpenAIChat, kPagodaWs };

// "openai" | "openai-chat" | "pagoda-ws"; throws std::invalid_argument.
Backend parse_backend(const std::string& name);
// The endpoint a backend uses when --endpoint is not given.
const char* default_endpoint(Backend b);

struct RequestOptions {
  std::string model;
  bool prompt_token_ids = false;  // send the prompt as its token ids (openai, pagoda-ws)
  bool ignore_eos = false;
  std::optional<int> logprobs;
};

// The JSON the backend sends for `sample` (for pagoda-ws the whole
// `completion` message, with `id` ws_id).
std::string request_body(Backend b, const SampleRequest& sample, const RequestOptions& opt,
                         const std::string& ws_id = "");

// Folds a stream's messages, one at a time, into a RequestResult, by
// vLLM's rules: a chunk with a non-empty `choices` (openai: any, even with
// empty text; chat: likewise, its delta.content appended) is an output
// chunk: the first sets TTFT, each later one adds an ITL gap; `usage`
// gives the output token count; the latency ends at the last output chunk
// (openai-chat: at the last chunk of any kind, as vLLM's chat client). For
// pagoda-ws each `delta` message is an output chunk and `done` ends it.
class StreamFolder {
 public:
  StreamFolder(Backend b, double start_s) : backend_(b), start_(start_s), last_(start_s) {}
  // payload: one SSE data payload or WebSocket message; t_s: when it was
  // read (seconds, the same clock as start_s). True when it ends the stream
  // ([DONE]; ws `done`). Throws std::runtime_error for a message that is
  // not JSON, an error event (ws `error`, an SSE `{"error": ...}`) or a ws
  // `done` whose finish_reason is "abort".
  bool add(const std::string& payload, double t_s, RequestResult& r);
  bool saw_output() const { return first_seen_; }
  double last_s() const { return last_; }

 private:
  Backend backend_;
  double start_;
  double last_;
  bool first_seen_ = false;
};

// s cut to at most n bytes plus "..." when longer, never inside a UTF-8
// character (a server's error body goes into messages and the result file).
std::string excerpt(const std::string& s, size_t n = 300);

// Errors of the client's own machine, not the server's: out of file
// descriptors (EMFILE, ENFILE: the open-file limit), buffers or memory, or
// local ports (EADDRNOTAVAIL).
bool is_client_side_error(const boost::system::error_code& ec);

// --base-url as vLLM uses it (api_url = base_url + endpoint):
// http://HOST[:PORT][/PATH], HOST a name, an IPv4 address or [IPv6]; PORT
// digits only, 80 when absent; PATH (no trailing "/") goes before
// --endpoint. Throws std::invalid_argument naming what is wrong (https,
// a bad port, a query or fragment).
struct BaseUrl {
  std::string host;
  uint16_t port = 80;
  std::string path;  // "" or "/prefix"
};
BaseUrl parse_base_url(const std::string& url);

// --endpoint as the request path: one without its leading "/"
// ("v1/completions") gets it (vLLM joins base_url + endpoint as strings, so
// there it would run into the port: "http://h:8000v1/completions"). Throws
// std::invalid_argument for a URL ("http://...": the server is --base-url)
// or a path with whitespace or control characters.
std::string normalize_endpoint(const std::string& endpoint);

struct Endpoint {
  boost::asio::ip::tcp::endpoint address;
  std::string host;     // Host header (and the WebSocket handshake's host)
  std::string path;     // --endpoint
  std::string api_key;  // "Authorization: Bearer KEY" when not empty
  // Each request's whole exchange (connect to its last byte) must end
  // within this, as vLLM's aiohttp ClientTimeout(total=6 h); a stream kept
  // alive by SSE comments or slow bytes still ends there.
  std::chrono::milliseconds timeout{std::chrono::hours(6)};
};

// Sends one request and reads its whole stream. bench_start: the
// benchmark's t = 0 (RequestResult::start is measured from it).
boost::asio::awaitable<RequestResult> run_request(Backend b, const Endpoint& ep,
                                                  const SampleRequest& sample,
                                                  const RequestOptions& opt,
                                                  std::chrono::steady_clock::time_point bench_start,
                                                  std::string ws_id);

}  // namespace pagoda::bench
