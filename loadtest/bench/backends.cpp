#include "loadtest/bench/backends.h"

#include <fmt/format.h>

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "loadtest/common/http_client.h"

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
  if (opt.logprobs) body["logprobs"] = *opt.logprobs;
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

namespace {

std::string excerpt(const std::string& s, size_t n = 300) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

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
  auto take_usage = [&](const json& msg) {
    auto u = msg.find("usage");
    if (u != msg.end() && u->is_object()) {
      auto c = u->find("completion_tokens");
      if (c != u->end() && c->is_number_integer()) r.output_tokens = c->get<int64_t>();
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

net::awaitable<void> run_sse(const Endpoint& ep, const std::string& body, StreamFolder& folder,
                             Clock::time_point origin, RequestResult& r) {
  beast::tcp_stream stream(co_await net::this_coro::executor);
  co_await loadtest::connect(stream, ep.address, ep.timeout);
  auto req = loadtest::make_request(http::verb::post, ep.path, body);
  req.set(http::field::host, ep.host);
  req.set(http::field::accept, "text/event-stream");
  if (!ep.api_key.empty()) req.set(http::field::authorization, "Bearer " + ep.api_key);
  req.keep_alive(false);
  co_await loadtest::send(stream, req, ep.timeout);
  beast::flat_buffer buffer;
  SseReader reader(stream, buffer, SseFraming::kLenient);
  const int status = co_await reader.read_header(ep.timeout);
  if (status != 200) {
    r.error = fmt::format("HTTP {}: {}", status, excerpt(reader.error_body()));
    co_return;
  }
  for (;;) {
    std::optional<std::string> event = co_await reader.next(ep.timeout);
    if (!event) throw std::runtime_error("the stream ended without [DONE]");
    if (folder.add(*event, seconds_since(origin), r)) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  r.success = true;
}

net::awaitable<void> run_ws(const Endpoint& ep, const std::string& body, StreamFolder& folder,
                            Clock::time_point origin, RequestResult& r) {
  websocket::stream<beast::tcp_stream> ws(co_await net::this_coro::executor);
  co_await loadtest::connect(beast::get_lowest_layer(ws), ep.address, ep.timeout);
  beast::get_lowest_layer(ws).expires_never();
  ws.set_option(websocket::stream_base::timeout{ep.timeout, ep.timeout, false});
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
  r.start = seconds_since(origin);
  StreamFolder folder(b, r.start);
  try {
    if (b == Backend::kPagodaWs)
      co_await run_ws(ep, body, folder, origin, r);
    else
      co_await run_sse(ep, body, folder, origin, r);
    if (r.success && !folder.saw_output()) {
      r.success = false;
      r.error = "no output chunk was received";
    }
  } catch (const boost::system::system_error& e) {
    r.success = false;
    r.error = e.code().message();  // what() adds the source location
  } catch (const std::exception& e) {
    r.success = false;
    r.error = e.what();
  }
  if (r.success) r.latency = folder.last_s() - r.start;
  co_return r;
}

}  // namespace pagoda::bench
