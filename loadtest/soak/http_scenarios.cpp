// HTTP scenarios of the soak: streamed and non-streamed completions and
// chats, hang-ups mid-stream, slow readers, malformed and oversized bodies.
#include <fmt/format.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <random>
#include <set>
#include <vector>

#include "loadtest/common/http_client.h"
#include "loadtest/common/net_error.h"
#include "loadtest/soak/scenarios.h"

namespace pagoda::loadtest {

namespace {

using net::use_awaitable;
using nlohmann::json;

// The client's keep-alive connection, opened on first use.
struct Conn {
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  net::awaitable<beast::tcp_stream*> get(SoakContext& ctx, int rcvbuf = 0) {
    if (!stream) {
      stream.emplace(co_await net::this_coro::executor);
      buffer.clear();
      co_await connect(*stream, ctx.endpoint, ctx.timeout, rcvbuf);
    }
    co_return &*stream;
  }
  void drop() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
      stream->socket().close(ignored);
      stream.reset();
    }
    buffer.clear();
  }
};

net::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  net::steady_timer t(co_await net::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(use_awaitable);
}

bool finished_ok(const json& reason) {
  return reason.is_string() &&
         (reason.get<std::string>() == "stop" || reason.get<std::string>() == "length");
}

// Follows an SSE stream's events: every choice must end with stop/length and
// the stream with [DONE]. `why` says what went wrong otherwise.
struct StreamCheck {
  int n = 1;
  std::set<int> finished;
  bool done = false;
  std::string why;

  void event(const std::string& payload) {
    if (done) {
      why = "an event after [DONE]";
      return;
    }
    if (payload == "[DONE]") {
      done = true;
      return;
    }
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded()) {
      why = "SSE event is not JSON: " + payload.substr(0, 80);
      return;
    }
    if (j.contains("error")) {
      why = "error event: " + payload.substr(0, 200);
      return;
    }
    for (const auto& c : j.value("choices", json::array())) {
      auto fr = c.find("finish_reason");
      if (fr == c.end() || fr->is_null()) continue;
      if (!finished_ok(*fr)) why = "finish_reason " + fr->dump();
      finished.insert(c.value("index", -1));
    }
  }
  bool ok() const { return why.empty() && done && static_cast<int>(finished.size()) == n; }
  std::string failure() const {
    if (!why.empty()) return why;
    if (!done) return "stream ended without [DONE]";
    return fmt::format("{} of {} choices finished", finished.size(), n);
  }
};

const char* path_for(bool chat) { return chat ? "/v1/chat/completions" : "/v1/completions"; }

// stream: true, read to the end.
net::awaitable<void> streamed(SoakContext& ctx, Rng& rng, Conn& conn, bool chat) {
  Kind kind = chat ? Kind::kSseChat : Kind::kSseCompletion;
  json body = short_request(rng, ctx.model, chat);
  body["stream"] = true;
  StreamCheck check;
  check.n = expected_choices(body);
  try {
    auto& s = *co_await conn.get(ctx);
    auto req = make_request(http::verb::post, path_for(chat), body.dump());
    co_await send(s, req, ctx.timeout);
    SseReader reader(s, conn.buffer);
    int status = co_await reader.read_header(ctx.timeout);
    if (status != 200) {
      ctx.tally->record(kind, Outcome::kLost,
                        fmt::format("HTTP {}: {}", status, reader.error_body().substr(0, 200)));
      conn.drop();
      co_return;
    }
    while (auto ev = co_await reader.next(ctx.timeout)) check.event(*ev);
    if (!reader.keep_alive()) conn.drop();
  } catch (const std::exception& e) {
    conn.drop();
    ctx.tally->record(kind, Outcome::kLost, describe_exception(e));
    co_return;
  }
  if (check.ok()) {
    ctx.tally->record(kind, Outcome::kCompleted);
  } else {
    ctx.tally->record(kind, Outcome::kLost, check.failure());
    conn.drop();
  }
}

// stream: false: a 200 whose every choice finished with stop/length.
net::awaitable<void> non_streamed(SoakContext& ctx, Rng& rng, Conn& conn, bool chat) {
  Kind kind = chat ? Kind::kChat : Kind::kCompletion;
  json body = short_request(rng, ctx.model, chat);
  try {
    auto& s = *co_await conn.get(ctx);
    auto req = make_request(http::verb::post, path_for(chat), body.dump());
    co_await send(s, req, ctx.timeout);
    HttpResult r = co_await read_response(s, conn.buffer, ctx.timeout);
    if (!r.keep_alive) conn.drop();
    json j = json::parse(r.body, nullptr, false);
    std::string why;
    if (r.status != 200)
      why = fmt::format("HTTP {}: {}", r.status, r.body.substr(0, 200));
    else if (j.is_discarded() || !j.contains("choices"))
      why = "no choices: " + r.body.substr(0, 200);
    else if (static_cast<int>(j["choices"].size()) != expected_choices(body))
      why = fmt::format("{} choices, expected {}", j["choices"].size(), expected_choices(body));
    else
      for (const auto& c : j["choices"])
        if (!finished_ok(c.value("finish_reason", json())))
          why = "finish_reason " + c.value("finish_reason", json()).dump();
    ctx.tally->record(kind, why.empty() ? Outcome::kCompleted : Outcome::kLost, why);
  } catch (const std::exception& e) {
    conn.drop();
    ctx.tally->record(kind, Outcome::kLost, describe_exception(e));
  }
}

// A long request the client leaves: mid-stream after 1–5 events, or (non-
// streamed) 0–300 ms after sending it.
net::awaitable<void> disconnect(SoakContext& ctx, Rng& rng, Conn& conn) {
  const bool chat = ctx.model.chat && std::bernoulli_distribution(0.3)(rng);
  const bool stream = std::bernoulli_distribution(0.7)(rng);
  json body = long_request(rng, ctx.model, chat);
  body["stream"] = stream;
  try {
    auto& s = *co_await conn.get(ctx);
    auto req = make_request(http::verb::post, path_for(chat), body.dump());
    co_await send(s, req, ctx.timeout);
    if (stream) {
      SseReader reader(s, conn.buffer);
      int status = co_await reader.read_header(ctx.timeout);
      if (status != 200) {
        ctx.tally->record(Kind::kHttpDisconnect, Outcome::kLost,
                          fmt::format("HTTP {}: {}", status, reader.error_body().substr(0, 200)));
        conn.drop();
        co_return;
      }
      StreamCheck check;
      int events = std::uniform_int_distribution<int>(1, 5)(rng);
      for (int i = 0; i < events && !check.done; ++i) {
        auto ev = co_await reader.next(ctx.timeout);
        if (!ev) break;
        check.event(*ev);
      }
      if (!check.why.empty()) {
        ctx.tally->record(Kind::kHttpDisconnect, Outcome::kLost, check.failure());
        conn.drop();
        co_return;
      }
    } else {
      co_await sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    }
  } catch (const std::exception& e) {
    conn.drop();
    ctx.tally->record(Kind::kHttpDisconnect, Outcome::kLost, describe_exception(e));
    co_return;
  }
  conn.drop();
  ctx.tally->record(Kind::kHttpDisconnect, Outcome::kClientAborted);
}

// A stream read through a 4 KiB receive window, 512 bytes at a time with a
// 10–40 ms pause per event: it must still complete.
net::awaitable<void> slow_reader(SoakContext& ctx, Rng& rng, Conn& conn) {
  conn.drop();
  json body = short_request(rng, ctx.model, false);
  body["max_tokens"] = std::uniform_int_distribution<int>(60, 160)(rng);
  body["ignore_eos"] = true;
  body["stream"] = true;
  body.erase("stop");
  StreamCheck check;
  check.n = expected_choices(body);
  try {
    auto& s = *co_await conn.get(ctx, /*rcvbuf=*/4096);
    auto req = make_request(http::verb::post, "/v1/completions", body.dump());
    co_await send(s, req, ctx.timeout);
    beast::flat_buffer small(512);
    SseReader reader(s, small);
    int status = co_await reader.read_header(ctx.timeout);
    if (status != 200) {
      ctx.tally->record(Kind::kSlowReader, Outcome::kLost,
                        fmt::format("HTTP {}: {}", status, reader.error_body().substr(0, 200)));
      conn.drop();
      co_return;
    }
    while (auto ev = co_await reader.next(ctx.timeout)) {
      check.event(*ev);
      co_await sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 40)(rng)));
    }
  } catch (const std::exception& e) {
    check.why = describe_exception(e);
  }
  conn.drop();  // the next scenario gets a connection with a normal window
  ctx.tally->record(Kind::kSlowReader, check.ok() ? Outcome::kCompleted : Outcome::kLost,
                    check.failure());
}

// A request that must be refused with `status` and OpenAI's error object.
net::awaitable<void> expect_error(SoakContext& ctx, Conn& conn, Kind kind, const std::string& path,
                                  const std::string& body, int status) {
  try {
    auto& s = *co_await conn.get(ctx);
    auto req = make_request(http::verb::post, path, body);
    if (body.empty()) req.set(http::field::content_type, "application/json");
    co_await send(s, req, ctx.timeout);
    HttpResult r = co_await read_response(s, conn.buffer, ctx.timeout);
    if (!r.keep_alive) conn.drop();
    json j = json::parse(r.body, nullptr, false);
    bool error_object = !j.is_discarded() && j.contains("error") && j["error"].is_object() &&
                        j["error"].value("message", "") != "";
    if (r.status == status && error_object) {
      ctx.tally->record(kind, Outcome::kRejectedAsExpected);
    } else {
      ctx.tally->record(kind, Outcome::kLost,
                        fmt::format("expected {} with an error object, got {}: {} (body sent: {})",
                                    status, r.status, r.body.substr(0, 200), body.substr(0, 100)));
    }
  } catch (const std::exception& e) {
    conn.drop();
    ctx.tally->record(kind, Outcome::kLost,
                      describe_exception(e) + " (body sent: " + body.substr(0, 100) + ")");
  }
}

// Headers announcing a body one byte over the limit, and no body: 413.
net::awaitable<void> oversized_body(SoakContext& ctx, Conn& conn) {
  try {
    auto& s = *co_await conn.get(ctx);
    std::string head = fmt::format(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n",
        ctx.max_body_bytes + 1);
    s.expires_after(ctx.timeout);
    co_await net::async_write(s, net::buffer(head), use_awaitable);
    HttpResult r = co_await read_response(s, conn.buffer, ctx.timeout);
    if (r.status == 413)
      ctx.tally->record(Kind::kOversizedBody, Outcome::kRejectedAsExpected);
    else
      ctx.tally->record(Kind::kOversizedBody, Outcome::kLost,
                        fmt::format("expected 413, got {}: {}", r.status, r.body.substr(0, 200)));
  } catch (const std::exception& e) {
    ctx.tally->record(Kind::kOversizedBody, Outcome::kLost, describe_exception(e));
  }
  conn.drop();  // the server closes after a 413 (the body was never sent)
}

// Half a request — the headers cut short, or a body shorter than its
// Content-Length — held for 0–500 ms, then the client leaves. Nothing may
// reach the engine (checked at the end with everything else).
net::awaitable<void> partial_request(SoakContext& ctx, Rng& rng, Conn& conn) {
  std::string full = fmt::format(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 200\r\n\r\n{{\"prompt\": \"Once upon a time\", \"max_tokens\": 8");
  size_t cut = std::uniform_int_distribution<size_t>(1, full.size() - 1)(rng);
  try {
    auto& s = *co_await conn.get(ctx);
    s.expires_after(ctx.timeout);
    co_await net::async_write(s, net::buffer(full.data(), cut), use_awaitable);
    co_await sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 500)(rng)));
  } catch (const std::exception& e) {
    conn.drop();
    ctx.tally->record(Kind::kPartialRequest, Outcome::kLost, describe_exception(e));
    co_return;
  }
  conn.drop();
  ctx.tally->record(Kind::kPartialRequest, Outcome::kClientAborted);
}

Kind pick_kind(SoakContext& ctx, Rng& rng, Kind first, Kind last) {
  std::vector<double> w;
  for (size_t k = static_cast<size_t>(first); k <= static_cast<size_t>(last); ++k)
    w.push_back(ctx.weights[k]);
  size_t i = std::discrete_distribution<size_t>(w.begin(), w.end())(rng);
  return static_cast<Kind>(static_cast<size_t>(first) + i);
}

}  // namespace

net::awaitable<void> http_client(SoakContext& ctx, uint64_t seed, std::chrono::milliseconds delay) {
  Rng rng(seed);
  Conn conn;
  co_await sleep_for(delay);
  while (std::chrono::steady_clock::now() < ctx.stop_at) {
    const bool chat_ok = ctx.model.chat;
    switch (pick_kind(ctx, rng, Kind::kSseCompletion, Kind::kPartialRequest)) {
      case Kind::kSseCompletion:
        co_await streamed(ctx, rng, conn, false);
        break;
      case Kind::kSseChat:
        co_await streamed(ctx, rng, conn, chat_ok);
        break;
      case Kind::kCompletion:
        co_await non_streamed(ctx, rng, conn, false);
        break;
      case Kind::kChat:
        co_await non_streamed(ctx, rng, conn, chat_ok);
        break;
      case Kind::kHttpDisconnect:
        co_await disconnect(ctx, rng, conn);
        break;
      case Kind::kSlowReader:
        co_await slow_reader(ctx, rng, conn);
        break;
      case Kind::kMalformed: {
        bool chat = chat_ok && std::bernoulli_distribution(0.5)(rng);
        co_await expect_error(ctx, conn, Kind::kMalformed, path_for(chat),
                              malformed_body(rng, chat), 400);
        break;
      }
      case Kind::kOversizedPrompt: {
        bool chat = chat_ok && std::bernoulli_distribution(0.5)(rng);
        co_await expect_error(ctx, conn, Kind::kOversizedPrompt, path_for(chat),
                              oversized_prompt_request(ctx.model, chat).dump(), 400);
        break;
      }
      case Kind::kOversizedBody:
        co_await oversized_body(ctx, conn);
        break;
      case Kind::kPartialRequest:
        co_await partial_request(ctx, rng, conn);
        break;
      default:
        break;
    }
  }
  conn.drop();
}

}  // namespace pagoda::loadtest
