#include "server/ws_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "server/guided_fields.h"
#include "server/openai_response.h"
#include "server/strict_json.h"

namespace pagoda {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

template <typename Json>
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

WsMessageError envelope_error(std::optional<std::string> id, std::string message,
                              std::string param = "") {
  return WsMessageError{std::move(id), bad_request(std::move(message), std::move(param))};
}

}  // namespace

std::variant<WsClientMessage, WsMessageError> parse_ws_message(std::string_view text) {
  std::variant<json, JsonParseFailure> parsed = parse_strict_json(text, "Message");
  if (auto* f = std::get_if<JsonParseFailure>(&parsed))
    return envelope_error(std::nullopt, std::move(f->message), std::move(f->param));
  json obj = std::move(std::get<json>(parsed));
  if (!obj.is_object()) return envelope_error(std::nullopt, "Message must be a JSON object");

  WsClientMessage m;
  std::optional<std::string> id;
  auto id_it = obj.find("id");
  if (id_it != obj.end()) {
    if (!id_it->is_string() || id_it->get_ref<const std::string&>().empty())
      return envelope_error(std::nullopt, "'id' must be a non-empty string", "id");
    id = id_it->get<std::string>();
    if (id->size() > kMaxWsIdBytes)
      return envelope_error(std::nullopt,
                            fmt::format("'id' is longer than {} bytes", kMaxWsIdBytes), "id");
    m.id = *id;
  }
  auto type_it = obj.find("type");
  if (type_it == obj.end() || !type_it->is_string())
    return envelope_error(
        id,
        "'type' must be one of chat, completion, cancel, resume, subscribe_stats, "
        "unsubscribe_stats",
        "type");
  const std::string& type = type_it->get_ref<const std::string&>();
  using T = WsClientMessage::Type;
  if (type == "chat")
    m.type = T::kChat;
  else if (type == "completion")
    m.type = T::kCompletion;
  else if (type == "cancel")
    m.type = T::kCancel;
  else if (type == "resume")
    m.type = T::kResume;
  else if (type == "subscribe_stats")
    m.type = T::kSubscribeStats;
  else if (type == "unsubscribe_stats")
    m.type = T::kUnsubscribeStats;
  else
    return envelope_error(
        id,
        fmt::format("Unknown message type '{}' (expected chat, completion, cancel, resume, "
                    "subscribe_stats or unsubscribe_stats)",
                    type),
        "type");
  bool needs_id = m.type != T::kSubscribeStats && m.type != T::kUnsubscribeStats;
  if (needs_id && !id)
    return envelope_error(std::nullopt, fmt::format("A '{}' message needs an 'id'", type), "id");

  if (m.type == T::kResume) {
    auto after = obj.find("after");
    if (after == obj.end()) {
      m.after = 0;
    } else if (!after->is_number_integer() || after->get<int64_t>() < 0) {
      return envelope_error(id, "'after' must be an integer >= 0 (the last seq received)", "after");
    } else {
      m.after = after->get<int64_t>();
    }
  }
  if (m.type == T::kSubscribeStats) {
    auto iv = obj.find("interval_ms");
    if (iv != obj.end()) {
      // Range-checked as a double before any conversion (1e300 has no int64).
      const double ms = iv->is_number() ? iv->get<double>() : -1;
      if (!iv->is_number() || !(ms >= 100 && ms <= 60000))
        return envelope_error(
            id, fmt::format("'interval_ms' must be a number from 100 to 60000, got {}", iv->dump()),
            "interval_ms");
      m.interval_ms = static_cast<int64_t>(ms);
    }
  }
  if (m.type == T::kChat || m.type == T::kCompletion) {
    auto res = obj.find("resumable");
    if (res != obj.end()) {
      if (!res->is_boolean())
        return envelope_error(id, "'resumable' must be a boolean", "resumable");
      m.resumable = res->get<bool>();
    }
    obj.erase("type");
    obj.erase("id");
    obj.erase("resumable");
    obj.erase("stream");  // a WebSocket request always streams
    obj.erase("stream_options");
    // The message parsed strictly above, so it parses here.
    if (m.type == T::kChat && chat_needs_key_order(obj)) m.ordered_body = ordered_json::parse(text);
    openai_fields::keep_schema_key_order(obj, text);
    m.body = std::move(obj);
  }
  return m;
}

ParseResult parse_ws_generation(WsClientMessage& msg, const ServingModel& model) {
  const bool has_prompt_logprobs = msg.body.contains("prompt_logprobs");
  ParseResult r = msg.type == WsClientMessage::Type::kChat
                      ? parse_chat_object(std::move(msg.body), model, /*check_context=*/true,
                                          msg.ordered_body ? &*msg.ordered_body : nullptr)
                      : parse_completion_object(std::move(msg.body), model);
  msg.body = nlohmann::json();
  msg.ordered_body.reset();
  // A WebSocket request streams: prompt_logprobs > 0 is refused as with
  // stream=true (vLLM), not computed and dropped.
  if (const auto* p = std::get_if<ParsedRequest>(&r);
      p && has_prompt_logprobs && p->sampling.prompt_logprobs.value_or(0) > 0)
    return bad_request("`prompt_logprobs` are not available when `stream=True`.",
                       "prompt_logprobs");
  return r;
}

std::string ws_delta_message(const std::string& id, int64_t seq, const ChoiceDelta& d) {
  // ordered_json: the logprobs' top entries keep their rank order.
  ordered_json msg = {{"type", "delta"},  {"id", id},       {"seq", seq},
                      {"index", d.index}, {"text", d.text}, {"token_ids", d.token_ids}};
  if (!d.logprobs.is_null()) msg["logprobs"] = d.logprobs;
  if (!d.tool_calls.empty()) msg["tool_calls"] = d.tool_calls;
  return dump(msg);
}

std::string ws_done_message(const std::string& id, int64_t seq,
                            const std::vector<ChoiceDelta>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens) {
  const ChoiceDelta first = choices.empty() ? ChoiceDelta{} : choices.front();
  json msg = {{"type", "done"},
              {"id", id},
              {"seq", seq},
              {"index", first.index},
              {"finish_reason", finish_reason_name(first)},
              {"stop_reason", first.stop_reason},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}}}};
  if (choices.size() > 1) {
    json list = json::array();
    for (const ChoiceDelta& c : choices)
      list.push_back({{"index", c.index},
                      {"finish_reason", finish_reason_name(c)},
                      {"stop_reason", c.stop_reason},
                      {"completion_tokens", c.completion_tokens}});
    msg["choices"] = std::move(list);
  }
  return dump(msg);
}

std::string ws_error_message(const std::optional<std::string>& id, const OpenAIError& e) {
  json j = e.to_json();  // {"error": {...}}
  return dump(
      json{{"type", "error"}, {"id", id ? json(*id) : json(nullptr)}, {"error", j["error"]}});
}

std::string ws_stats_message(const EngineStats& now, const EngineStats& before, double elapsed_s) {
  double dt = elapsed_s > 0 ? elapsed_s : 1.0;
  auto mean = [](const LatencyHistogram& a, const LatencyHistogram& b) -> json {
    int64_t n = a.count - b.count;
    if (n <= 0) return nullptr;
    return (a.sum - b.sum) / static_cast<double>(n);
  };
  int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  return dump(json{
      {"type", "stats"},
      {"time", static_cast<double>(unix_ms) / 1000.0},
      {"num_requests_running", now.num_running},
      {"num_requests_waiting", now.num_waiting},
      {"kv_cache_usage_perc", now.kv_cache_usage()},
      {"kv_cache_used_blocks", now.kv_blocks_used},
      {"kv_cache_blocks_total", now.kv_blocks_total},
      {"prompt_tokens_total", now.prompt_tokens_total},
      {"generation_tokens_total", now.generation_tokens_total},
      {"engine_steps_total", now.steps_total},
      {"prompt_tokens_per_s",
       static_cast<double>(now.prompt_tokens_total - before.prompt_tokens_total) / dt},
      {"generation_tokens_per_s",
       static_cast<double>(now.generation_tokens_total - before.generation_tokens_total) / dt},
      {"mean_time_to_first_token_s", mean(now.time_to_first_token, before.time_to_first_token)},
      {"mean_inter_token_latency_s", mean(now.inter_token_latency, before.inter_token_latency)},
  });
}

}  // namespace pagoda
