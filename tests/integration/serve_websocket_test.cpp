// /v1/ws against the real `pagoda serve` over loopback, with a Beast
// WebSocket client: interleaved requests on one socket equal their
// non-streamed results; cancel stops one and not the others; resume after a
// forced disconnect yields exactly the missing deltas; errors, stats and the
// chat UI's files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "tests/integration/serve_test_util.h"
#include "tests/integration/ws_client.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

struct Joined {
  std::string text;
  std::vector<int32_t> token_ids;
  int64_t last_seq = 0;
  size_t deltas = 0;
  json done;  // the done (or error) message
  bool seq_increasing = true;
};

// Reads until every id in `ids` has its done/error message.
std::map<std::string, Joined> read_until_done(WsClient& ws, std::set<std::string> ids,
                                              std::vector<std::string>* order = nullptr,
                                              std::map<std::string, Joined> joined = {}) {
  while (!ids.empty()) {
    json m = ws.read();
    if (m["type"] == "stats") continue;
    std::string id = m["id"].is_string() ? m["id"].get<std::string>() : "";
    Joined& j = joined[id];
    if (order) order->push_back(m["type"].get<std::string>() + ":" + id);
    if (m["type"] == "delta") {
      int64_t seq = m["seq"];
      if (seq <= j.last_seq) j.seq_increasing = false;
      j.last_seq = seq;
      j.text += m["text"].get<std::string>();
      for (const auto& t : m["token_ids"]) j.token_ids.push_back(t.get<int32_t>());
      ++j.deltas;
    } else {
      j.done = m;
      ids.erase(id);
    }
  }
  return joined;
}

json completion(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
}

class ServeWebSocket : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new PagodaServer(
        {std::string(PAGODA_SOURCE_DIR) + "/models/stories260K", "--network-threads", "2"});
  }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
  }
  // The non-streamed result over HTTP.
  static json reference(const json& body) {
    json b = body;
    b["return_token_ids"] = true;
    return post_json(server_->port(), "/v1/completions", b)["choices"][0];
  }
  static std::vector<int32_t> ids_of(const json& choice) {
    return choice["token_ids"].get<std::vector<int32_t>>();
  }
  static PagodaServer* server_;
};
PagodaServer* ServeWebSocket::server_ = nullptr;

TEST_F(ServeWebSocket, ThreeInterleavedRequestsEqualTheirNonStreamedResults) {
  // r0 is as long as the context allows; r1 and r2 are sent once r0 streams,
  // so with continuous batching they finish while r0 is still running. The
  // order is decided by engine steps (r1 needs 60 of r0's ~480), not by how
  // fast the socket delivers the three messages.
  const json bodies[3] = {completion("Once upon a time", 480), completion("The little dog", 60),
                          completion("Lily and Tom", 90)};
  json refs[3];
  for (int i = 0; i < 3; ++i) refs[i] = reference(bodies[i]);
  WsClient ws(server_->port());
  auto send = [&](int i) {
    json m = bodies[i];
    m["type"] = "completion";
    m["id"] = fmt::format("r{}", i);
    ws.send(m);
  };
  send(0);
  std::vector<std::string> order;
  std::map<std::string, Joined> joined;
  {
    json first = ws.read();
    ASSERT_EQ(first["type"], "delta") << first.dump();
    ASSERT_EQ(first["id"], "r0");
    order.push_back("delta:r0");
    Joined& j = joined["r0"];
    j.last_seq = first["seq"];
    j.text = first["text"];
    for (const auto& t : first["token_ids"]) j.token_ids.push_back(t.get<int32_t>());
    ++j.deltas;
  }
  send(1);
  send(2);
  joined = read_until_done(ws, {"r0", "r1", "r2"}, &order, std::move(joined));
  for (int i = 0; i < 3; ++i) {
    const Joined& j = joined[fmt::format("r{}", i)];
    SCOPED_TRACE(i);
    EXPECT_EQ(j.text, refs[i]["text"].get<std::string>());
    EXPECT_EQ(j.token_ids, ids_of(refs[i]));
    EXPECT_TRUE(j.seq_increasing);
    EXPECT_EQ(j.done["type"], "done");
    EXPECT_EQ(j.done["finish_reason"], "length");
    EXPECT_EQ(j.done["usage"]["completion_tokens"], bodies[i]["max_tokens"]);
    // The finishing token's engine delta is the last one: done repeats the
    // last delta message's seq (docs/WEBSOCKET.md).
    EXPECT_EQ(j.done["seq"].get<int64_t>(), j.last_seq);
  }
  // Interleaved: r1 and r2 streamed and finished while r0 was still running.
  auto at = [&](const std::string& what) {
    return std::find(order.begin(), order.end(), what) - order.begin();
  };
  const auto r0_done = at("done:r0");
  ASSERT_LT(r0_done, static_cast<long>(order.size()));
  EXPECT_LT(at("done:r1"), r0_done);
  EXPECT_LT(at("done:r2"), r0_done);
  EXPECT_NE(std::find(order.begin() + at("delta:r1"), order.begin() + r0_done, "delta:r0"),
            order.begin() + r0_done)
      << "r0 streamed on while r1 ran";
}

TEST_F(ServeWebSocket, CancelStopsOneAndTheOtherTwoFinish) {
  const json a = completion("Once upon a time", 100), b = completion("The little dog", 480),
             c = completion("Lily and Tom", 100);
  json ref_a = reference(a), ref_c = reference(c);
  WsClient ws(server_->port());
  int i = 0;
  for (const json* body : {&a, &b, &c}) {
    json m = *body;
    m["type"] = "completion";
    m["id"] = std::string("c") + "abc"[i++];
    ws.send(m);
  }
  // Cancel b at its first delta.
  std::map<std::string, Joined> joined;
  std::set<std::string> open = {"ca", "cb", "cc"};
  bool cancelled = false;
  while (!open.empty()) {
    json m = ws.read();
    std::string id = m["id"];
    Joined& j = joined[id];
    if (m["type"] == "delta") {
      j.text += m["text"].get<std::string>();
      for (const auto& t : m["token_ids"]) j.token_ids.push_back(t.get<int32_t>());
      if (id == "cb" && !cancelled) {
        ws.send({{"type", "cancel"}, {"id", "cb"}});
        cancelled = true;
      }
    } else {
      j.done = m;
      open.erase(id);
    }
  }
  EXPECT_EQ(joined["cb"].done["finish_reason"], "abort");
  EXPECT_LT(joined["cb"].done["usage"]["completion_tokens"].get<int>(), 480);
  EXPECT_EQ(joined["ca"].done["finish_reason"], "length");
  EXPECT_EQ(joined["cc"].done["finish_reason"], "length");
  EXPECT_EQ(joined["ca"].text, ref_a["text"].get<std::string>());
  EXPECT_EQ(joined["cc"].text, ref_c["text"].get<std::string>());
  EXPECT_EQ(joined["cc"].token_ids, ids_of(ref_c));
  // The socket still serves.
  ws.send({{"type", "completion"},
           {"id", "cd"},
           {"prompt", "Once upon a time"},
           {"max_tokens", 5},
           {"temperature", 0}});
  auto more = read_until_done(ws, {"cd"});
  EXPECT_EQ(more["cd"].done["usage"]["completion_tokens"], 5);
}

TEST_F(ServeWebSocket, ResumeAfterAForcedDisconnectYieldsExactlyTheMissingDeltas) {
  const json body = completion("Once upon a time", 300);
  json ref = reference(body);
  Joined first;
  {
    WsClient ws(server_->port());
    json m = body;
    m["type"] = "completion";
    m["id"] = "resume-1";
    ws.send(m);
    while (first.last_seq < 5) {
      json d = ws.read();
      ASSERT_EQ(d["type"], "delta") << d.dump();
      first.last_seq = d["seq"];
      first.text += d["text"].get<std::string>();
      for (const auto& t : d["token_ids"]) first.token_ids.push_back(t.get<int32_t>());
    }
    ws.drop();  // no close frame: the stream stays resumable
  }
  WsClient ws2(server_->port());
  ws2.send({{"type", "resume"}, {"id", "resume-1"}, {"after", first.last_seq}});
  auto rest = read_until_done(ws2, {"resume-1"});
  const Joined& r = rest["resume-1"];
  EXPECT_EQ(first.text + r.text, ref["text"].get<std::string>());
  std::vector<int32_t> ids = first.token_ids;
  ids.insert(ids.end(), r.token_ids.begin(), r.token_ids.end());
  EXPECT_EQ(ids, ids_of(ref));
  EXPECT_EQ(r.done["finish_reason"], "length");
  EXPECT_TRUE(r.seq_increasing);
  // Finished and delivered: nothing left to resume.
  ws2.send({{"type", "resume"}, {"id", "resume-1"}, {"after", 0}});
  json e = ws2.read();
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["code"], 404);
}

// A resume of a stream still attached to another live socket (a client
// that reconnected before the server saw its old connection die) takes it
// over; the old socket is told with a 409 error for the id.
TEST_F(ServeWebSocket, ResumeFromAnotherLiveSocketTakesOverAndTellsTheOldOne) {
  const json body = completion("Once upon a time", 480);
  json ref = reference(body);
  WsClient a(server_->port()), b(server_->port());
  json m = body;
  m["type"] = "completion";
  m["id"] = "moved";
  a.send(m);
  json first = a.read();
  ASSERT_EQ(first["type"], "delta") << first.dump();
  b.send({{"type", "resume"}, {"id", "moved"}, {"after", 0}});
  auto rest = read_until_done(b, {"moved"});
  const Joined& r = rest["moved"];
  ASSERT_EQ(r.done["type"], "done") << r.done.dump();
  EXPECT_EQ(r.done["finish_reason"], "length");
  EXPECT_EQ(r.text, ref["text"].get<std::string>());
  EXPECT_EQ(r.token_ids, ids_of(ref));
  EXPECT_TRUE(r.seq_increasing);
  // A: perhaps a few more deltas it was already sent, then the 409, never a done.
  json x;
  for (x = a.read(); x["type"] == "delta"; x = a.read()) EXPECT_EQ(x["id"], "moved");
  ASSERT_EQ(x["type"], "error") << x.dump();
  EXPECT_EQ(x["id"], "moved");
  EXPECT_EQ(x["error"]["code"], 409);
  EXPECT_EQ(x["error"]["type"], "ConflictError");
  EXPECT_EQ(x["error"]["message"], "stream moved was resumed on another connection");
  // A still serves.
  a.send({{"type", "completion"},
          {"id", "after-move"},
          {"prompt", "Once"},
          {"max_tokens", 5},
          {"temperature", 0}});
  auto more = read_until_done(a, {"after-move"});
  EXPECT_EQ(more["after-move"].done["usage"]["completion_tokens"], 5);
}

TEST_F(ServeWebSocket, NonResumableStreamsAreAbortedOnAnAbruptDrop) {
  const uint16_t port = server_->port();
  auto aborted = [&] {
    return metric(HttpClient(port).get("/metrics").body, "pagoda:request_success_total",
                  "finished_reason=\"abort\"");
  };
  const double before = aborted();
  {
    WsClient ws(port);
    json m = completion("Once upon a time", 480);
    m["type"] = "completion";
    m["id"] = "nores";
    m["resumable"] = false;
    ws.send(m);
    ws.read();
    ws.drop();
  }
  // Aborted by the drop itself (bounded wait for the engine's next step).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (aborted() != before + 1 && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(aborted(), before + 1);
  WsClient ws(port);
  ws.send({{"type", "resume"}, {"id", "nores"}, {"after", 0}});
  json e = ws.read();
  EXPECT_EQ(e["type"], "error") << e.dump();
  EXPECT_EQ(e["error"]["code"], 404) << e.dump();
}

TEST_F(ServeWebSocket, NChoicesEachStreamToTheirEndAsOverHttp) {
  json body = {{"prompt", "Once upon a time"},
               {"max_tokens", 40},
               {"n", 3},
               {"seed", 5},
               {"temperature", 1.0}};
  json http = post_json(server_->port(), "/v1/completions", body);
  ASSERT_EQ(http["choices"].size(), 3u) << http.dump();
  WsClient ws(server_->port());
  json m = body;
  m["type"] = "completion";
  m["id"] = "n3";
  ws.send(m);
  std::string text[3];
  json done;
  for (;;) {
    json r = ws.read();
    if (r["type"] == "delta") {
      int index = r["index"];
      ASSERT_TRUE(index >= 0 && index < 3) << r.dump();
      text[index] += r["text"].get<std::string>();
      continue;
    }
    ASSERT_EQ(r["type"], "done") << r.dump();
    done = r;
    break;
  }
  int64_t completion_tokens = 0;
  for (const json& c : http["choices"]) {
    const int i = c["index"];
    SCOPED_TRACE(i);
    EXPECT_EQ(text[i], c["text"].get<std::string>());
    ASSERT_EQ(done["choices"].size(), 3u) << done.dump();
    EXPECT_EQ(done["choices"][i]["finish_reason"], c["finish_reason"]) << done.dump();
    completion_tokens += done["choices"][i]["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(done["usage"]["completion_tokens"], http["usage"]["completion_tokens"]) << done.dump();
  EXPECT_EQ(done["usage"]["completion_tokens"].get<int64_t>(), completion_tokens);
}

TEST_F(ServeWebSocket, ACloseFrameAbortsAtOnceEvenWhenTheClientNoLongerReads) {
  const uint16_t port = server_->port();
  auto scrape = [&] { return HttpClient(port).get("/metrics").body; };
  const double before =
      metric(scrape(), "pagoda:request_success_total", "finished_reason=\"abort\"");
  WsClient ws(port, /*rcvbuf=*/4096);
  json m = completion("Once upon a time", 480);
  m["n"] = 8;
  m["temperature"] = 1.0;  // n > 1 samples (greedy takes n 1, as vLLM)
  m["type"] = "completion";
  m["id"] = "closer";
  ws.send(m);
  ws.read();  // it streams
  ws.send_close_frame_only();
  const auto sent = std::chrono::steady_clock::now();
  std::string text;
  double waited_s = 0;
  do {
    text = scrape();
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  } while (
      !(metric(text, "pagoda:request_success_total", "finished_reason=\"abort\"") == before + 1 &&
        metric(text, "pagoda:num_requests_running") == 0 &&
        metric(text, "pagoda:kv_cache_used_blocks") == 0) &&
      waited_s < 1.0);
  EXPECT_EQ(metric(text, "pagoda:request_success_total", "finished_reason=\"abort\""), before + 1)
      << text;
  EXPECT_EQ(metric(text, "pagoda:num_requests_running"), 0) << text;
  EXPECT_EQ(metric(text, "pagoda:kv_cache_used_blocks"), 0) << text;
  std::printf("[ metrics ] close frame from a non-reading client: aborted and freed %.3f s later\n",
              waited_s);
}

// Issue 12: a close frame and, at once, a TCP reset while the server's
// write to this non-reading client is pending. The write fails in the same
// reactor pass that reads the close frame; the frame still means the client
// is done: the (resumable) request is aborted at once, not kept for the 30 s
// resume grace period.
TEST_F(ServeWebSocket, ACloseFrameFollowedAtOnceByAResetAbortsAtOnce) {
  const uint16_t port = server_->port();
  auto scrape = [&] { return HttpClient(port).get("/metrics").body; };
  const double before =
      metric(scrape(), "pagoda:request_success_total", "finished_reason=\"abort\"");
  {
    WsClient ws(port, /*rcvbuf=*/4096);
    json m = completion("Once upon a time", 480);
    m["n"] = 8;
    m["temperature"] = 1.0;  // n > 1 samples (greedy takes n 1, as vLLM)
    m["type"] = "completion";
    m["id"] = "close-then-reset";
    ASSERT_TRUE(
        m.value("resumable", true));  // kept for a resume if the connection were merely lost
    ws.send(m);
    ws.read();  // it streams
    ws.send_close_frame_only();
    ws.reset();
  }
  // Polled with a bound far below the 30 s grace period a detached stream
  // would be kept for (its abort would come from the sweeper only then).
  const auto sent = std::chrono::steady_clock::now();
  std::string text;
  double waited_s = 0;
  do {
    text = scrape();
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  } while (
      !(metric(text, "pagoda:request_success_total", "finished_reason=\"abort\"") == before + 1 &&
        metric(text, "pagoda:num_requests_running") == 0 &&
        metric(text, "pagoda:kv_cache_used_blocks") == 0) &&
      waited_s < 15.0);
  EXPECT_EQ(metric(text, "pagoda:request_success_total", "finished_reason=\"abort\""), before + 1)
      << text;
  EXPECT_EQ(metric(text, "pagoda:num_requests_running"), 0) << text;
  EXPECT_EQ(metric(text, "pagoda:kv_cache_used_blocks"), 0) << text;
  std::printf("[ metrics ] close frame then reset: aborted and freed %.3f s later\n", waited_s);
}

// A text message that is not UTF-8 breaks the protocol: the server closes
// with 1007 and, as after the client's own close frame (docs/WEBSOCKET.md),
// that socket's requests are aborted at once and their KV blocks freed,
// nothing kept for a resume; another socket's request goes on to its end.
// They used to be detached as after a lost connection: resumable, holding
// their blocks for the 30 s grace period.
TEST_F(ServeWebSocket, AnInvalidUtf8MessageClosesWith1007AndAbortsTheSocketsRequests) {
  const uint16_t port = server_->port();
  auto scrape = [&] { return HttpClient(port).get("/metrics").body; };
  auto aborted = [](const std::string& text) {
    return metric(text, "pagoda:request_success_total", "finished_reason=\"abort\"");
  };
  const double before = aborted(scrape());
  WsClient other(port);
  json o = completion("The little dog", 300);
  o["type"] = "completion";
  o["id"] = "bystander";
  other.send(o);
  WsClient ws(port);
  json m = completion("Once upon a time", 480);
  m["type"] = "completion";
  m["id"] = "utf8-breaker";
  ASSERT_TRUE(m.value("resumable", true));
  ws.send(m);
  ASSERT_EQ(ws.read()["type"], "delta");  // it streams
  ws.send_raw_text_frame("{\"type\": \"cancel\", \"id\": \"\xFF\"}");
  // Its deltas, then the close frame.
  for (;;) {
    try {
      ws.read();
    } catch (const std::runtime_error&) {
      break;
    }
  }
  EXPECT_EQ(ws.close_reason().code, 1007);
  // The other socket's request streams on to its end.
  auto joined = read_until_done(other, {"bystander"});
  EXPECT_EQ(joined["bystander"].done["type"], "done") << joined["bystander"].done.dump();
  EXPECT_EQ(joined["bystander"].done["finish_reason"], "length");
  EXPECT_EQ(joined["bystander"].token_ids.size(), 300u);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    text = scrape();
  } while (!(aborted(text) == before + 1 && metric(text, "pagoda:kv_cache_used_blocks") == 0 &&
             metric(text, "pagoda:num_requests_running") == 0) &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(aborted(text), before + 1) << text;
  EXPECT_EQ(metric(text, "pagoda:kv_cache_used_blocks"), 0) << text;
  WsClient again(port);
  again.send({{"type", "resume"}, {"id", "utf8-breaker"}, {"after", 0}});
  const json e = again.read();
  EXPECT_EQ(e["type"], "error") << e.dump();
  EXPECT_EQ(e["error"]["code"], 404) << e.dump();
}

TEST_F(ServeWebSocket, BadMessagesGetErrorsAndHarmNothingElse) {
  WsClient ws(server_->port());
  ws.send_text("{oops");
  json e = ws.read();
  EXPECT_EQ(e["type"], "error");
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_EQ(e["error"]["code"], 400);
  ws.send({{"type", "completion"}, {"id", "bad"}, {"prompt", "x"}, {"temperature", -1}});
  e = ws.read();
  EXPECT_EQ(e["id"], "bad");
  EXPECT_EQ(e["error"]["param"], "temperature");
  // stories260K has no chat template: the HTTP API's 400, over the socket.
  ws.send({{"type", "chat"},
           {"id", "ch"},
           {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  e = ws.read();
  EXPECT_EQ(e["id"], "ch");
  EXPECT_EQ(e["error"]["code"], 400);
  ws.send({{"type", "cancel"}, {"id", "nobody"}});
  EXPECT_EQ(ws.read()["error"]["code"], 404);
  // A duplicate id while the first runs.
  ws.send({{"type", "completion"},
           {"id", "dup"},
           {"prompt", "Once"},
           {"max_tokens", 200},
           {"temperature", 0}});
  ws.send({{"type", "completion"},
           {"id", "dup"},
           {"prompt", "Once"},
           {"max_tokens", 5},
           {"temperature", 0}});
  json conflict;
  auto joined = read_until_done(ws, {"dup"});
  // The 409 came before or after the done; read_until_done stops at the
  // first done/error for the id.
  if (joined["dup"].done["type"] == "error") {
    conflict = joined["dup"].done;
    joined = read_until_done(ws, {"dup"}, nullptr, joined);
  } else {
    conflict = ws.read();
  }
  EXPECT_EQ(conflict["type"], "error") << conflict.dump();
  EXPECT_EQ(conflict["error"]["code"], 409) << conflict.dump();
  // The error says the running request is not ended by it ...
  EXPECT_NE(conflict["error"]["message"].get<std::string>().find("that request continues"),
            std::string::npos)
      << conflict.dump();
  // ... and indeed the original streams on to its done, all 200 tokens.
  EXPECT_EQ(joined["dup"].done["type"], "done") << joined["dup"].done.dump();
  EXPECT_EQ(joined["dup"].done["finish_reason"], "length") << joined["dup"].done.dump();
  EXPECT_EQ(joined["dup"].done["usage"]["completion_tokens"], 200);
  EXPECT_EQ(joined["dup"].token_ids.size(), 200u);
  // Plain GET /v1/ws: 426.
  HttpClient c(server_->port());
  EXPECT_EQ(c.get("/v1/ws").status, 426);
}

TEST_F(ServeWebSocket, StatsSubscriptionReportsTheEngine) {
  WsClient ws(server_->port());
  ws.send({{"type", "subscribe_stats"}, {"interval_ms", 100}});
  ws.send({{"type", "completion"},
           {"id", "st"},
           {"prompt", "Once upon a time"},
           {"max_tokens", 300},
           {"temperature", 0},
           {"ignore_eos", true}});
  bool saw_running = false, saw_tps = false;
  int stats = 0;
  for (bool done = false; !done;) {
    json m = ws.read();
    if (m["type"] == "done") done = true;
    if (m["type"] != "stats") continue;
    ++stats;
    EXPECT_GT(m["kv_cache_blocks_total"].get<int64_t>(), 0);
    EXPECT_GE(m["kv_cache_usage_perc"].get<double>(), 0.0);
    if (m["num_requests_running"].get<int64_t>() >= 1) saw_running = true;
    if (m["generation_tokens_per_s"].get<double>() > 0) saw_tps = true;
  }
  // Waiting for one more tick (an event on the socket, bounded by read's deadline).
  json m;
  do m = ws.read();
  while (m["type"] != "stats");
  ++stats;
  EXPECT_GE(stats, 1);
  EXPECT_TRUE(saw_running || saw_tps || m["generation_tokens_per_s"].get<double>() > 0);
}

TEST_F(ServeWebSocket, ServesTheChatUi) {
  HttpClient c(server_->port());
  HttpResponse r = c.get("/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("/app.js"), std::string::npos);
  r = c.get("/app.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(r.body.find("/v1/ws"), std::string::npos);
  EXPECT_EQ(c.get("/style.css").status, 200);
  EXPECT_EQ(c.get("/missing.js").status, 404);
  EXPECT_EQ(c.get("/..%2fCMakeLists.txt").status, 404);
  EXPECT_EQ(c.get("/README.md").status, 404);  // not a served extension
}

// A random-weight Qwen2 chat model (../shared): its sampled text is full of
// CJK characters, emoji and byte tokens, so characters straddle tokens.
TEST(ServeWebSocketUnicode, ChatDeltasAreWholeCharactersAndJoinToTheNonStreamedText) {
  PagodaServer server({shared_path("models/tiny-random-qwen2-chat"), "--network-threads", "2"});
  const json body = {
      {"messages", json::array({{{"role", "user"}, {"content", "你好！讲个故事 🙂"}}})},
      {"max_tokens", 64},
      {"temperature", 1.0},
      {"seed", 1234},
      {"ignore_eos", true}};
  json ref = post_json(server.port(), "/v1/chat/completions", body)["choices"][0]["message"];
  WsClient ws(server.port());
  json m = body;
  m["type"] = "chat";
  m["id"] = "u1";
  ws.send(m);
  std::string joined;
  size_t non_ascii_deltas = 0;
  for (;;) {
    json d = ws.read();
    if (d["type"] != "delta") {
      EXPECT_EQ(d["type"], "done") << d.dump();
      break;
    }
    // Each message is valid UTF-8 (the parser would throw otherwise). A
    // character cut between two deltas would reach the socket as two
    // U+FFFD replacements, and the joined text would differ from the
    // non-streamed one.
    const std::string t = d["text"];
    if (std::any_of(t.begin(), t.end(),
                    [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      ++non_ascii_deltas;
    joined += t;
  }
  EXPECT_EQ(joined, ref["content"].get<std::string>());
  EXPECT_GT(non_ascii_deltas, 0u) << "the sample had no non-ASCII text: " << joined;
  std::printf("[ unicode ] %zu deltas with non-ASCII text; joined == non-streamed (%zu bytes)\n",
              non_ascii_deltas, joined.size());
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace pagoda::testing_http
