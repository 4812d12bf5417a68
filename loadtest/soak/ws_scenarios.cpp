// /v1/ws scenarios of the soak (docs/WEBSOCKET.md): several requests on one
// socket read to their `done`, cancels, close frames and dropped
// connections mid-stream, resumes on a new socket, malformed and oversized
// messages.
#include <fmt/format.h>

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>
#include <map>
#include <random>
#include <vector>

#include "loadtest/common/http_client.h"
#include "loadtest/common/net_error.h"
#include "loadtest/soak/scenarios.h"

namespace pagoda::loadtest {

namespace {

namespace websocket = beast::websocket;
using net::use_awaitable;
using nlohmann::json;
using Ws = websocket::stream<beast::tcp_stream>;

// The client's socket on /v1/ws, opened on first use.
struct WsConn {
  std::optional<Ws> ws;
  beast::flat_buffer buffer;

  net::awaitable<Ws*> get(SoakContext& ctx) {
    if (!ws) {
      ws.emplace(co_await net::this_coro::executor);
      buffer.clear();
      co_await connect(beast::get_lowest_layer(*ws), ctx.endpoint, ctx.timeout);
      beast::get_lowest_layer(*ws).expires_never();
      websocket::stream_base::timeout t{ctx.timeout, ctx.timeout, false};
      ws->set_option(t);
      co_await ws->async_handshake("127.0.0.1", "/v1/ws", use_awaitable);
    }
    co_return &*ws;
  }
  net::awaitable<void> send(SoakContext& ctx, const std::string& text) {
    Ws& w = *co_await get(ctx);
    co_await w.async_write(net::buffer(text), use_awaitable);
  }
  net::awaitable<json> read(SoakContext& ctx) {
    Ws& w = *co_await get(ctx);
    co_await w.async_read(buffer, use_awaitable);
    std::string text = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error("not a JSON object: " + text.substr(0, 100));
    co_return j;
  }
  // An abrupt loss: no close frame.
  void drop() {
    if (ws) {
      beast::error_code ignored;
      auto& sock = beast::get_lowest_layer(*ws).socket();
      sock.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
      sock.close(ignored);
      ws.reset();
    }
    buffer.clear();
  }
  // A close frame and the close handshake (bounded by the timeout option).
  net::awaitable<void> close() {
    if (!ws) co_return;
    try {
      co_await ws->async_close(websocket::close_code::normal, use_awaitable);
    } catch (const std::exception&) {
    }
    drop();
  }
};

bool finished_ok(const json& reason) {
  return reason.is_string() &&
         (reason.get<std::string>() == "stop" || reason.get<std::string>() == "length");
}

// "" when a done message says every choice ended with stop/length; else why not.
std::string done_failure(const json& done) {
  if (done.contains("choices")) {
    for (const auto& c : done["choices"])
      if (!finished_ok(c.value("finish_reason", json())))
        return "choice finish_reason " + c.value("finish_reason", json()).dump();
    return "";
  }
  return finished_ok(done.value("finish_reason", json()))
             ? ""
             : "finish_reason " + done.value("finish_reason", json()).dump();
}

// A generation message: the body of short/long_request with type and id.
std::string generation(const json& body, bool chat, const std::string& id, bool resumable = true) {
  json msg = body;
  msg["type"] = chat ? "chat" : "completion";
  msg["id"] = id;
  if (!resumable) msg["resumable"] = false;
  return msg.dump();
}

// {"type": type, "id": id} (with "after" for a resume). Built outside any
// co_await expression: GCC 12 rejects initializer-list temporaries there.
std::string control_message(const char* type, const std::string& id, int64_t after = -1) {
  json m = {{"type", type}, {"id", id}};
  if (after >= 0) m["after"] = after;
  return m.dump();
}

struct Pending {
  int64_t last_seq = 0;
  bool done = false;
};

// Checks one server message against the requests in flight; "" or why it is
// wrong. Sets *done_msg for a done.
std::string follow(std::map<std::string, Pending>& pending, const json& m, json* done_msg) {
  const std::string type = m.value("type", "");
  const std::string id = m.contains("id") && m["id"].is_string() ? m["id"].get<std::string>() : "";
  auto it = pending.find(id);
  if (it == pending.end() || it->second.done)
    return "message for an unknown or finished id: " + m.dump().substr(0, 200);
  if (type == "error") return "error: " + m.dump().substr(0, 300);
  if (type != "delta" && type != "done") return "unexpected message: " + m.dump().substr(0, 200);
  int64_t seq = m.value("seq", int64_t{-1});
  if (type == "delta" && seq <= it->second.last_seq)
    return fmt::format("delta seq {} after {}", seq, it->second.last_seq);
  if (type == "done" && seq < it->second.last_seq)
    return fmt::format("done seq {} before {}", seq, it->second.last_seq);
  it->second.last_seq = seq;
  if (type == "done") {
    it->second.done = true;
    *done_msg = m;
  }
  return "";
}

// 1–3 requests at once on the socket, each read to its done.
net::awaitable<void> requests(SoakContext& ctx, Rng& rng, WsConn& conn) {
  std::map<std::string, Pending> pending;
  int count = std::uniform_int_distribution<int>(1, 3)(rng);
  try {
    for (int i = 0; i < count; ++i) {
      bool chat = ctx.model.chat && std::bernoulli_distribution(0.5)(rng);
      std::string id = ctx.new_id();
      pending[id] = {};
      co_await conn.send(ctx, generation(short_request(rng, ctx.model, chat), chat, id));
    }
    size_t open = pending.size();
    while (open > 0) {
      json m = co_await conn.read(ctx);
      json done;
      std::string why = follow(pending, m, &done);
      if (!why.empty()) {
        // The request named (or, if none, every open one) is lost.
        const std::string id =
            m.contains("id") && m["id"].is_string() ? m["id"].get<std::string>() : "";
        if (pending.count(id) && !pending[id].done) {
          pending[id].done = true;
          --open;
          ctx.tally->record(Kind::kWsRequest, Outcome::kLost, why);
          continue;
        }
        throw std::runtime_error(why);
      }
      if (!done.is_null()) {
        --open;
        std::string bad = done_failure(done);
        ctx.tally->record(Kind::kWsRequest, bad.empty() ? Outcome::kCompleted : Outcome::kLost,
                          bad);
      }
    }
  } catch (const std::exception& e) {
    for (auto& [id, p] : pending)
      if (!p.done) ctx.tally->record(Kind::kWsRequest, Outcome::kLost, describe_exception(e));
    conn.drop();
  }
}

// A long request; after its first delta the client cancels it (kWsCancel),
// sends a close frame (kWsClose; sometimes the TCP close follows at once),
// drops the connection (kWsDrop, resumable: false) or drops it and resumes on
// a new socket (kWsResume).
net::awaitable<void> interrupted(SoakContext& ctx, Rng& rng, WsConn& conn, Kind kind) {
  const bool chat = ctx.model.chat && std::bernoulli_distribution(0.5)(rng);
  const std::string id = ctx.new_id();
  std::map<std::string, Pending> pending{{id, {}}};
  json body = long_request(rng, ctx.model, chat);
  if (kind == Kind::kWsResume)
    body["max_tokens"] = std::uniform_int_distribution<int>(40, 120)(rng);
  try {
    co_await conn.send(ctx, generation(body, chat, id, kind != Kind::kWsDrop));
    json done;
    while (pending[id].last_seq == 0) {
      json m = co_await conn.read(ctx);
      std::string why = follow(pending, m, &done);
      if (!why.empty()) throw std::runtime_error(why);
      if (!done.is_null()) break;  // finished before the first delta: nothing to interrupt
    }
    if (!done.is_null()) {
      std::string bad = done_failure(done);
      ctx.tally->record(kind, bad.empty() ? Outcome::kCompleted : Outcome::kLost, bad);
      co_return;
    }
    switch (kind) {
      case Kind::kWsCancel: {
        co_await conn.send(ctx, control_message("cancel", id));
        while (done.is_null()) {
          json m = co_await conn.read(ctx);
          std::string why = follow(pending, m, &done);
          if (!why.empty()) throw std::runtime_error(why);
        }
        const bool aborted = done.value("finish_reason", json()) == "abort";
        std::string bad = aborted ? "" : done_failure(done);
        ctx.tally->record(kind,
                          !bad.empty() ? Outcome::kLost
                          : aborted    ? Outcome::kClientAborted
                                       : Outcome::kCompleted,
                          bad);
        co_return;
      }
      case Kind::kWsClose:
        if (std::bernoulli_distribution(0.5)(rng)) {
          co_await conn.close();
        } else {  // a close frame, then the TCP close at once (no handshake)
          Ws& w = *co_await conn.get(ctx);
          static constexpr std::array<unsigned char, 8> kFrame = {
              0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE9};  // masked close 1001
          beast::get_lowest_layer(w).expires_after(ctx.timeout);
          co_await net::async_write(beast::get_lowest_layer(w), net::buffer(kFrame), use_awaitable);
          conn.drop();
        }
        ctx.tally->record(kind, Outcome::kClientAborted);
        co_return;
      case Kind::kWsDrop:
        conn.drop();
        ctx.tally->record(kind, Outcome::kClientAborted);
        co_return;
      default:
        break;
    }
    // kWsResume: a new socket picks the stream up after the last seq seen.
    conn.drop();
    const int64_t after = pending[id].last_seq;
    co_await conn.send(ctx, control_message("resume", id, after));
    while (done.is_null()) {
      json m = co_await conn.read(ctx);
      std::string why = follow(pending, m, &done);
      if (!why.empty()) throw std::runtime_error(why);
    }
    std::string bad = done_failure(done);
    ctx.tally->record(kind, bad.empty() ? Outcome::kCompleted : Outcome::kLost, bad);
  } catch (const std::exception& e) {
    ctx.tally->record(kind, Outcome::kLost, describe_exception(e));
    conn.drop();
  }
}

// A message that must get an `error` with code 400 (and its id, if it had
// one); the socket stays usable. `oversized`: a well-formed completion whose
// prompt is beyond max_model_len.
net::awaitable<void> rejected(SoakContext& ctx, Rng& rng, WsConn& conn, Kind kind) {
  const std::string id = ctx.new_id();
  bool has_id = true;
  std::string text = kind == Kind::kWsOversized
                         ? generation(oversized_prompt_request(ctx.model, false), false, id)
                         : malformed_ws_message(rng, id, &has_id);
  try {
    co_await conn.send(ctx, text);
    json m = co_await conn.read(ctx);
    const json want_id = has_id ? json(id) : json();
    if (m.value("type", "") == "error" && m.value("id", json()) == want_id && m.contains("error") &&
        m["error"].value("code", 0) == 400 && !m["error"].value("message", "").empty()) {
      ctx.tally->record(kind, Outcome::kRejectedAsExpected);
    } else {
      ctx.tally->record(kind, Outcome::kLost,
                        fmt::format("expected an error with code 400, got {} (sent {})",
                                    m.dump().substr(0, 200), text.substr(0, 100)));
      conn.drop();
    }
  } catch (const std::exception& e) {
    ctx.tally->record(kind, Outcome::kLost,
                      describe_exception(e) + " (sent " + text.substr(0, 100) + ")");
    conn.drop();
  }
}

net::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  net::steady_timer t(co_await net::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(use_awaitable);
}

}  // namespace

net::awaitable<void> ws_client(SoakContext& ctx, uint64_t seed, std::chrono::milliseconds delay) {
  Rng rng(seed);
  WsConn conn;
  co_await sleep_for(delay);
  std::vector<double> w;
  for (size_t k = static_cast<size_t>(Kind::kWsRequest);
       k <= static_cast<size_t>(Kind::kWsOversized); ++k)
    w.push_back(ctx.weights[k]);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  while (std::chrono::steady_clock::now() < ctx.stop_at) {
    Kind kind = static_cast<Kind>(static_cast<size_t>(Kind::kWsRequest) + pick(rng));
    switch (kind) {
      case Kind::kWsRequest:
        co_await requests(ctx, rng, conn);
        break;
      case Kind::kWsCancel:
      case Kind::kWsClose:
      case Kind::kWsDrop:
      case Kind::kWsResume:
        co_await interrupted(ctx, rng, conn, kind);
        break;
      case Kind::kWsMalformed:
      case Kind::kWsOversized:
        co_await rejected(ctx, rng, conn, kind);
        break;
      default:
        break;
    }
  }
  co_await conn.close();
}

}  // namespace pagoda::loadtest
