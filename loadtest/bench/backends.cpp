#include "loadtest/bench/backends.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/websocket.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "loadtest/common/http_client.h"
#include "loadtest/common/net_error.h"

namespace pagoda::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using loadtest::SseFraming;
using loadtest::SseReader;
using net::use_awaitable;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

bool is_client_side_error(const boost::system::error_code& ec) {
  namespace errc = boost::system::errc;
  return ec == errc::too_many_files_open || ec == errc::too_many_files_open_in_system ||
         ec == errc::no_buffer_space || ec == errc::not_enough_memory ||
         ec == errc::address_not_available;
}

BaseUrl parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw std::invalid_argument("--base-url: https is not supported (http:// only): " + url);
  if (url.rfind(scheme, 0) != 0)
    throw std::invalid_argument("--base-url must start with http://, got " + url);
  std::string rest = url.substr(scheme.size());
  if (rest.find_first_of("?#") != std::string::npos)
    throw std::invalid_argument("--base-url must not have a query or fragment: " + url);
  BaseUrl out;
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.path = rest.substr(slash);
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  if (authority.find('@') != std::string::npos)
    throw std::invalid_argument("--base-url must not carry user information: " + url);
  std::string port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos)
      throw std::invalid_argument("--base-url: unclosed '[' in " + url);
    out.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw std::invalid_argument("--base-url: bad host in " + url);
      port = after.substr(1);
      if (port.empty()) throw std::invalid_argument("--base-url: empty port in " + url);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) throw std::invalid_argument("--base-url: empty port in " + url);
    }
  }
  if (out.host.empty()) throw std::invalid_argument("--base-url has no host: " + url);
  if (!port.empty()) {
    const bool digits = port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    const long value = digits ? std::stol(port) : 0;
    if (!digits || value < 1 || value > 65535)
      throw std::invalid_argument(
          fmt::format("--base-url: port '{}' is not a number in 1-65535: {}", port, url));
    out.port = static_cast<uint16_t>(value);
  }
  return out;
}

std::string normalize_endpoint(const std::string& endpoint) {
  if (endpoint.find("://") != std::string::npos)
    throw std::invalid_argument(fmt::format(
        "--endpoint takes the API path (/v1/completions), got the URL '{}'; give the server "
        "with --base-url (or --host and --port)",
        endpoint));
  for (unsigned char c : endpoint)
    if (c <= ' ' || c == 0x7f)
      throw std::invalid_argument(fmt::format(
          "--endpoint must not contain spaces or control characters, got '{}'", endpoint));
  if (endpoint.empty() || endpoint.front() != '/') return "/" + endpoint;
  return endpoint;
}

Backend parse_backend(const std::string& name) {
  if (name == "openai") return Backend::kOpenAI;
  if (name == "openai-chat") return Backend::kOpenAIChat;
  if (name == "pagoda-ws") return Backend::kPagodaWs;
  throw std::invalid_argument(
      fmt::format("unknown backend '{}' (openai, openai-chat, pagoda-ws)", name));
}

const char* default_endpoint(Backend b) {
  switch (b) {
    case Backend::kOpenAI:
      return "/v1/completions";
    case Backend::kOpenAIChat:
      return "/v1/chat/completions";
    case Backend::kPagodaWs:
      return "/v1/ws";
  }
  return "/v1/completions";
}

std::string request_body(Backend b, const SampleRequest& sample, const RequestOptions& opt,
                         const std::string& ws_id) {
  json body = json::object();
  body["model"] = opt.model;
  if (b == Backend::kOpenAIChat) {
    json part = {{"type", "text"}, {"text", sample.prompt}};
    body["messages"] = json::array({json{{"role", "user"}, {"content", json::array({part})}}});
  } else if (opt.prompt_token_ids) {
    body["prompt"] = sample.prompt_token_ids;
  } else {
    body["prompt"] = sample.prompt;
  }
  body["temperature"] = 0.0;
  body["max_tokens"] = sample.expected_output_len;
  if (opt.logprobs) {
    // /v1/chat/completions takes a boolean `logprobs` and the count as
    // `top_logprobs` (an integer `logprobs` there is a 400 on every request);
    // /v1/completions and the WebSocket's completion take the count itself.
    // vLLM's benchmark chat client drops --logprobs altogether; this asks
    // the chat server for the same work the completions request does.
    if (b == Backend::kOpenAIChat) {
      body["logprobs"] = true;
      body["top_logprobs"] = *opt.logprobs;
    } else {
      body["logprobs"] = *opt.logprobs;
    }
  }
  if (opt.ignore_eos) body["ignore_eos"] = true;
  if (b == Backend::kPagodaWs) {
    body["type"] = "completion";
    body["id"] = ws_id;
  } else {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body.dump();
}

namespace {}  // namespace

std::string excerpt(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  // Back off to a character boundary: never cut a UTF-8 sequence (its
  // continuation bytes are 10xxxxxx). Text that is not UTF-8 at all is
  // left as it is (the result file's dump replaces invalid bytes).
  size_t cut = n;
  for (size_t back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80;
       ++back)
    --cut;
  if ((static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) cut = n;
  return s.substr(0, cut) + "...";
}

namespace {

std::string error_message(const json& e) {
  if (e.is_object() && e.contains("message") && e["message"].is_string())
    return e["message"].get<std::string>();
  return e.dump();
}

}  // namespace

bool StreamFolder::add(const std::string& payload, double t, RequestResult& r) {
  if (backend_ != Backend::kPagodaWs && payload == "[DONE]") return true;
  json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error("not a JSON object: " + excerpt(payload));
  auto output_chunk = [&](const std::string& text) {
    if (!first_seen_) {
      first_seen_ = true;
      r.ttft = t - start_;
    } else {
      r.itl.push_back(t - last_);
    }
    last_ = t;
    r.generated_text += text;
  };
  // A usage count is taken only when it is a count: an integer from 0 to
  // int64's max. Anything else (a string, 2.5, -3: a broken server) leaves
  // the field unset, so the tokenizer's count (output) or the dataset's
  // (prompt) is used instead of a negative total and throughput.
  auto usage_count = [](const json& u, const char* key) -> std::optional<int64_t> {
    auto v = u.find(key);
    if (v == u.end()) return std::nullopt;
    if (v->is_number_unsigned()) {
      const uint64_t n = v->get<uint64_t>();
      if (n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return static_cast<int64_t>(n);
    } else if (v->is_number_integer() && v->get<int64_t>() >= 0) {
      return v->get<int64_t>();
    }
    return std::nullopt;
  };
  auto take_usage = [&](const json& msg) {
    auto u = msg.find("usage");
    if (u != msg.end() && u->is_object()) {
      if (auto c = usage_count(*u, "completion_tokens")) r.output_tokens = c;
      if (auto p = usage_count(*u, "prompt_tokens")) r.prompt_tokens = p;
    }
  };
  if (backend_ == Backend::kPagodaWs) {
    const std::string type = j.value("type", "");
    if (type == "error")
      throw std::runtime_error("error: " + error_message(j.value("error", json())));
    if (type == "delta") {
      output_chunk(j.value("text", ""));
      if (r.request_id.empty() && j.contains("id") && j["id"].is_string()) r.request_id = j["id"];
    } else if (type == "done") {
      take_usage(j);
      if (j.value("finish_reason", json()) == "abort")
        throw std::runtime_error("the request was aborted");
      return true;
    }
    return false;
  }
  if (j.contains("error")) throw std::runtime_error("error event: " + error_message(j["error"]));
  if (r.request_id.empty() && j.contains("id") && j["id"].is_string()) r.request_id = j["id"];
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array() && !choices->empty()) {
    const json& c = (*choices)[0];
    std::string text;
    if (backend_ == Backend::kOpenAIChat) {
      auto d = c.find("delta");
      if (d != c.end() && d->is_object() && d->contains("content") && (*d)["content"].is_string())
        text = (*d)["content"].get<std::string>();
    } else if (c.contains("text") && c["text"].is_string()) {
      text = c["text"].get<std::string>();
    }
    output_chunk(text);
  }
  take_usage(j);
  if (backend_ == Backend::kOpenAIChat) last_ = t;
  return false;
}

namespace {

double seconds_since(Clock::time_point origin) {
  return std::chrono::duration<double>(Clock::now() - origin).count();
}

// What is left of the request's deadline (0 once it has passed: the next
// operation then fails at once with beast::error::timeout).
std::chrono::milliseconds left(Clock::time_point deadline) {
  const auto d = deadline - Clock::now();
  if (d <= Clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(d);
}

net::awaitable<void> run_sse(const Endpoint& ep, const std::string& body, StreamFolder& folder,
                             Clock::time_point origin, Clock::time_point deadline,
                             RequestResult& r) {
  beast::tcp_stream stream(co_await net::this_coro::executor);
  // The deadline's watchdog: closes the socket when it passes, whatever the
  // stream is waiting for (declared after the stream: destroyed first, its
  // cancelled wait then touches nothing).
  net::steady_timer watchdog(co_await net::this_coro::executor, deadline);
  watchdog.async_wait([&stream, &r](const boost::system::error_code& ec) {
    if (ec) return;
    r.timed_out = true;
    beast::error_code ignored;
    stream.socket().close(ignored);
  });
  co_await loadtest::connect(stream, ep.address, left(deadline));
  auto req = loadtest::make_request(http::verb::post, ep.path, body);
  req.set(http::field::host, ep.host);
  req.set(http::field::accept, "text/event-stream");
  if (!ep.api_key.empty()) req.set(http::field::authorization, "Bearer " + ep.api_key);
  req.keep_alive(false);
  co_await loadtest::send(stream, req, left(deadline));
  beast::flat_buffer buffer;
  SseReader reader(stream, buffer, SseFraming::kLenient);
  const int status = co_await reader.read_header(left(deadline));
  if (status != 200) {
    r.error = fmt::format("HTTP {}: {}", status, excerpt(reader.error_body()));
    co_return;
  }
  for (;;) {
    std::optional<std::string> event = co_await reader.next(left(deadline));
    if (!event) throw std::runtime_error("the stream ended without [DONE]");
    if (folder.add(*event, seconds_since(origin), r)) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  r.success = true;
}

net::awaitable<void> run_ws(const Endpoint& ep, const std::string& body, StreamFolder& folder,
                            Clock::time_point origin, Clock::time_point deadline,
                            RequestResult& r) {
  websocket::stream<beast::tcp_stream> ws(co_await net::this_coro::executor);
  net::steady_timer watchdog(co_await net::this_coro::executor, deadline);  // as run_sse's
  watchdog.async_wait([&ws, &r](const boost::system::error_code& ec) {
    if (ec) return;
    r.timed_out = true;
    beast::error_code ignored;
    beast::get_lowest_layer(ws).socket().close(ignored);
  });
  co_await loadtest::connect(beast::get_lowest_layer(ws), ep.address, left(deadline));
  // One deadline for the whole exchange: the TCP stream's expiry stays set
  // for every later read and write (the WebSocket's own idle timeouts are
  // left off, so they do not reset it).
  ws.set_option(websocket::stream_base::timeout{websocket::stream_base::none(),
                                                websocket::stream_base::none(), false});
  beast::get_lowest_layer(ws).expires_at(deadline);
  if (!ep.api_key.empty()) {
    const std::string auth = "Bearer " + ep.api_key;
    ws.set_option(websocket::stream_base::decorator(
        [auth](websocket::request_type& req) { req.set(http::field::authorization, auth); }));
  }
  co_await ws.async_handshake(ep.host, ep.path, use_awaitable);
  co_await ws.async_write(net::buffer(body), use_awaitable);
  beast::flat_buffer buffer;
  for (;;) {
    co_await ws.async_read(buffer, use_awaitable);
    const std::string text = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    if (folder.add(text, seconds_since(origin), r)) break;
  }
  r.success = true;
  try {
    // The close handshake gets a short time of its own (the result is in).
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(5));
    co_await ws.async_close(websocket::close_code::normal, use_awaitable);
  } catch (const std::exception&) {
  }
}

}  // namespace

net::awaitable<RequestResult> run_request(Backend b, const Endpoint& ep,
                                          const SampleRequest& sample, const RequestOptions& opt,
                                          Clock::time_point origin, std::string ws_id) {
  RequestResult r;
  r.prompt_len = sample.prompt_len;
  const std::string body = request_body(b, sample, opt, ws_id);
  const Clock::time_point sent = Clock::now();
  const Clock::time_point deadline = sent + ep.timeout;
  r.start = std::chrono::duration<double>(sent - origin).count();
  StreamFolder folder(b, r.start);
  try {
    if (b == Backend::kPagodaWs)
      co_await run_ws(ep, body, folder, origin, deadline, r);
    else
      co_await run_sse(ep, body, folder, origin, deadline, r);
    if (r.success && !folder.saw_output()) {
      r.success = false;
      r.error = "no output chunk was received";
    }
  } catch (const boost::system::system_error& e) {
    r.success = false;
    if (e.code() == beast::error::timeout || r.timed_out) {
      r.error = fmt::format("timed out: no complete response within --request-timeout ({} s)",
                            std::chrono::duration<double>(ep.timeout).count());
    } else {
      r.error = loadtest::describe_net_error(e.code());  // what() adds the source location
      r.client_side = is_client_side_error(e.code());
      if (r.client_side) r.error = "client-side: " + r.error;
    }
  } catch (const std::exception& e) {
    r.success = false;
    r.error = e.what();
  }
  if (r.timed_out && !r.success)
    r.error = fmt::format("timed out: no complete response within --request-timeout ({} s)",
                          std::chrono::duration<double>(ep.timeout).count());
  if (r.success) r.latency = folder.last_s() - r.start;
  co_return r;
}

}  // namespace pagoda::bench
