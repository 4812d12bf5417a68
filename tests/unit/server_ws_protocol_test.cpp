// The /v1/ws message layer: envelope parsing, reuse of the HTTP API's
// request parsing, and the server messages' exact shape.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/guided/guide.h"
#include "server/ws_protocol.h"
// GCC 12's -Wrestrict false positive (GCC bug 105329) on the test model's
// "[" + std::string, when -O3 inlines it into this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "tests/unit/protocol_test_model.h"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace pagoda {
namespace {

using nlohmann::json;
using T = WsClientMessage::Type;

WsClientMessage ok(const std::string& text) {
  auto r = parse_ws_message(text);
  if (auto* e = std::get_if<WsMessageError>(&r)) ADD_FAILURE() << text << " → " << e->error.message;
  return std::get<WsClientMessage>(r);
}

WsMessageError err(const std::string& text) {
  auto r = parse_ws_message(text);
  EXPECT_TRUE(std::holds_alternative<WsMessageError>(r)) << text;
  return std::holds_alternative<WsMessageError>(r) ? std::get<WsMessageError>(r) : WsMessageError{};
}

TEST(WsProtocol, ParsesEveryClientMessageType) {
  WsClientMessage m =
      ok(R"({"type":"chat","id":"a","messages":[],"resumable":false,"stream":false})");
  EXPECT_EQ(m.type, T::kChat);
  EXPECT_EQ(m.id, "a");
  EXPECT_FALSE(m.resumable);
  EXPECT_EQ(m.body, json::parse(R"({"messages":[]})"));  // envelope fields removed
  EXPECT_EQ(ok(R"({"type":"completion","id":"b","prompt":"x"})").type, T::kCompletion);
  EXPECT_TRUE(ok(R"({"type":"completion","id":"b","prompt":"x"})").resumable);
  EXPECT_EQ(ok(R"({"type":"cancel","id":"b"})").type, T::kCancel);
  m = ok(R"({"type":"resume","id":"b","after":7})");
  EXPECT_EQ(m.type, T::kResume);
  EXPECT_EQ(m.after, 7);
  m = ok(R"({"type":"subscribe_stats","interval_ms":250})");
  EXPECT_EQ(m.type, T::kSubscribeStats);
  EXPECT_EQ(m.interval_ms, 250);
  EXPECT_EQ(ok(R"({"type":"subscribe_stats"})").interval_ms, 1000);
  EXPECT_EQ(ok(R"({"type":"unsubscribe_stats"})").type, T::kUnsubscribeStats);
}

TEST(WsProtocol, BadEnvelopesGetAnErrorWithTheirIdWhenKnown) {
  EXPECT_EQ(err("not json").error.status, 400);
  EXPECT_EQ(err("[1]").error.status, 400);
  EXPECT_FALSE(err(R"({"type":"cancel"})").id.has_value());  // id required
  WsMessageError e = err(R"({"type":"bogus","id":"q"})");
  EXPECT_EQ(e.id, "q");
  EXPECT_EQ(e.error.param, "type");
  EXPECT_EQ(err(R"({"type":"resume","id":"q","after":-1})").error.param, "after");
  for (const char* iv : {"5", "99.9", "60001", "1e300", "-1e300", "\"500\"", "null"}) {
    WsMessageError bad =
        err(fmt::format(R"({{"type":"subscribe_stats","id":"s","interval_ms":{}}})", iv));
    EXPECT_EQ(bad.error.param, "interval_ms") << iv;
    EXPECT_NE(bad.error.message.find("from 100 to 60000"), std::string::npos) << bad.error.message;
  }
  EXPECT_EQ(err(R"({"type":"chat","id":""})").error.param, "id");
  EXPECT_EQ(err(R"({"type":"chat","id":7})").error.param, "id");
  EXPECT_EQ(err(fmt::format(R"({{"type":"chat","id":"{}"}})", std::string(300, 'x'))).error.param,
            "id");
  EXPECT_EQ(err(R"({"type":"chat","id":"a","resumable":1})").error.param, "resumable");
  std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(err(fmt::format(R"({{"type":"chat","id":"a","x":{}}})", deep)).error.status, 400);
  // The HTTP bodies' strict parse: a key twice in one object, a lone surrogate.
  EXPECT_NE(err(R"({"type":"completion","id":"a","prompt":"x","prompt":"y"})")
                .error.message.find("Message has the key 'prompt' twice"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"type":"completion","id":"a","prompt":"\ud800"})").error.message.find("surrogate"),
      std::string::npos);
}

TEST(WsProtocol, GenerationFieldsGoThroughTheHttpApisParser) {
  ServingModel model = testing_protocol::make_test_model();
  WsClientMessage m =
      ok(R"({"type":"completion","id":"a","prompt":"hi","max_tokens":3,"temperature":0.5})");
  ParseResult r = parse_ws_generation(m, model);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r));
  const ParsedRequest& p = std::get<ParsedRequest>(r);
  EXPECT_EQ(p.prompt_token_ids, (std::vector<int32_t>{1, 'h' + 3, 'i' + 3}));
  EXPECT_EQ(p.sampling.max_tokens, 3);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  // The same validation (and message) as POST /v1/completions.
  WsClientMessage bad = ok(R"({"type":"completion","id":"a","prompt":"hi","temperature":-1})");
  ParseResult http = parse_completion_request(R"({"prompt":"hi","temperature":-1})", model);
  ParseResult ws = parse_ws_generation(bad, model);
  ASSERT_TRUE(std::holds_alternative<OpenAIError>(ws));
  EXPECT_EQ(std::get<OpenAIError>(ws).body(), std::get<OpenAIError>(http).body());
  WsClientMessage chat =
      ok(R"({"type":"chat","id":"c","messages":[{"role":"user","content":"yo"}]})");
  ParseResult c = parse_ws_generation(chat, model);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(c));
  EXPECT_EQ(std::get<ParsedRequest>(c).kind, ApiKind::kChat);
}

// A guided_json schema's properties keep the message's order (the
// generated object's key order), as over HTTP.
TEST(WsProtocol, GuidedSchemaPropertiesKeepTheOrderSent) {
  ServingModel model = testing_protocol::make_test_model();
  WsClientMessage m =
      ok(R"({"type":"completion","id":"a","prompt":"hi","guided_json":{"type":"object",)"
         R"("properties":{"zeta":{"type":"integer"},"alpha":{"type":"boolean"}},)"
         R"("required":["zeta","alpha"]}})");
  ParseResult r = parse_ws_generation(m, model);
  ASSERT_TRUE(std::holds_alternative<ParsedRequest>(r));
  const ParsedRequest& p = std::get<ParsedRequest>(r);
  ASSERT_TRUE(p.sampling.guide);
  EXPECT_TRUE(p.sampling.guide->matches(R"({"zeta": 1, "alpha": true})"));
  EXPECT_FALSE(p.sampling.guide->matches(R"({"alpha": true, "zeta": 1})"));
}

TEST(WsProtocol, ServerMessagesHaveTheDocumentedShape) {
  ChoiceDelta d;
  d.text = "你好🙂";
  d.token_ids = {5, 6};
  EXPECT_EQ(
      json::parse(ws_delta_message("a", 4, d)),
      json::parse(
          R"({"type":"delta","id":"a","seq":4,"index":0,"text":"你好🙂","token_ids":[5,6]})"));
  // Logprobs (when asked for) as the SSE chunk carries them.
  d.logprobs = {{"content", json::array()}};
  EXPECT_EQ(json::parse(ws_delta_message("a", 4, d))["logprobs"], json(d.logprobs));
  ChoiceDelta f;
  f.finished = true;
  f.finish_reason = FinishReason::kLength;
  f.completion_tokens = 5;
  EXPECT_EQ(
      json::parse(ws_done_message("a", 6, {f}, 3, 5)),
      json::parse(
          R"({"type":"done","id":"a","seq":6,"index":0,"finish_reason":"length","stop_reason":null,
                            "usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}})"));
  // Several choices (prompts x n): each one's finish, usage over all.
  ChoiceDelta g = f;
  g.index = 1;
  g.finish_reason = FinishReason::kStop;
  g.stop_reason = "\n";
  g.completion_tokens = 2;
  json two = json::parse(ws_done_message("a", 9, {f, g}, 7, 7));
  EXPECT_EQ(
      two["choices"],
      json::parse(R"([{"index":0,"finish_reason":"length","stop_reason":null,"completion_tokens":5},
                                             {"index":1,"finish_reason":"stop","stop_reason":"\n","completion_tokens":2}])"));
  EXPECT_EQ(two["usage"]["total_tokens"], 14);
  json e = json::parse(ws_error_message(std::nullopt, bad_request("nope", "x")));
  EXPECT_EQ(e["type"], "error");
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_EQ(e["error"]["message"], "nope");
  EXPECT_EQ(e["error"]["code"], 400);
  // Invalid UTF-8 never reaches the socket (WebSocket text must be UTF-8).
  ChoiceDelta bad;
  bad.text = "\xff";
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(ws_delta_message("a", 1, bad)));
  EXPECT_TRUE(parsed.is_object());
  EngineStats before, now;
  now.generation_tokens_total = 500;
  now.time_to_first_token.observe(0.25);
  json s = json::parse(ws_stats_message(now, before, 2.0));
  EXPECT_EQ(s["type"], "stats");
  EXPECT_DOUBLE_EQ(s["generation_tokens_per_s"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(s["mean_time_to_first_token_s"].get<double>(), 0.25);
  EXPECT_TRUE(s["mean_inter_token_latency_s"].is_null());
}

}  // namespace
}  // namespace pagoda
