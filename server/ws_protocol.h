// The /v1/ws message protocol (docs/WEBSOCKET.md): parsing client messages
// and formatting server messages. Pure functions; no I/O.
//
// Client → server (one JSON object per WebSocket text message):
//   {"type": "chat" | "completion", "id": "<client id>", ...}  the body of
//       POST /v1/chat/completions or /v1/completions (same fields, same
//       validation: parse_chat_request / parse_completion_request), plus
//       optional "resumable" (bool, default true);
//   {"type": "cancel", "id"}            aborts that request;
//   {"type": "resume", "id", "after"}   re-attaches a stream, replaying the
//                                       deltas with seq > after (taking it
//                                       over from another live socket, which
//                                       gets a 409 error for the id);
//   {"type": "subscribe_stats", "interval_ms"?} / {"type": "unsubscribe_stats"}.
// Server → client:
//   {"type": "delta", "id", "seq", "index", "text", "token_ids", "logprobs"?}
//   {"type": "done", "id", "seq", "finish_reason", "stop_reason", "usage"}
//   {"type": "error", "id" (null when unknown), "error": {OpenAI error object}}
//   {"type": "stats", ...}
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/stats.h"
#include "server/choice_output.h"
#include "server/openai_error.h"
#include "server/openai_request.h"
#include "server/serving_model.h"

namespace pagoda {

struct WsClientMessage {
  enum class Type { kChat, kCompletion, kCancel, kResume, kSubscribeStats, kUnsubscribeStats };
  Type type = Type::kChat;
  std::string id;                // client-chosen; required except for (un)subscribe_stats
  int64_t after = 0;             // resume: the last seq the client has
  bool resumable = true;         // chat/completion: keep the stream after an abrupt disconnect
  int64_t interval_ms = 1000;    // subscribe_stats: period in ms, [100, 60000] (else an error)
  nlohmann::json body;           // chat/completion: the HTTP body fields
  // chat whose rendering depends on key order (chat_needs_key_order: tools,
  // tool_calls): the message again with each object's key order as sent.
  std::optional<nlohmann::ordered_json> ordered_body;
};

// An error to report on the socket; id is the message's id when it had one.
struct WsMessageError {
  std::optional<std::string> id;
  OpenAIError error;
};

inline constexpr size_t kMaxWsIdBytes = 256;

// Parses and checks the envelope (type, id, after, interval_ms). Request
// fields are checked later by parse_ws_generation.
std::variant<WsClientMessage, WsMessageError> parse_ws_message(std::string_view text);

// chat/completion → the protocol layer's ParsedRequest (or its error), by
// the HTTP API's own parsers. "stream" is ignored (always streamed).
// msg.body is moved into the parser (left null): a big prompt is not copied.
ParseResult parse_ws_generation(WsClientMessage& msg, const ServingModel& model);

// Server messages (serialized; invalid UTF-8 replaced by U+FFFD).
// {"type":"delta", id, seq, index, text, token_ids} for d (one choice's
// deltas, appended), plus "logprobs" (SSE's shape for those tokens) when the
// request asked for logprobs.
std::string ws_delta_message(const std::string& id, int64_t seq, const ChoiceDelta& d);
// {"type":"done", id, seq, index, finish_reason, stop_reason, usage} from
// every choice's output (GenerationGroup::choices(), index order; the top
// level fields are choice 0's); with more than one choice (prompts x n) also
// "choices": [{index, finish_reason, stop_reason, completion_tokens}]. usage:
// prompt_tokens (each prompt once), completion_tokens (every choice).
std::string ws_done_message(const std::string& id, int64_t seq,
                            const std::vector<ChoiceDelta>& choices, int64_t prompt_tokens,
                            int64_t completion_tokens);
std::string ws_error_message(const std::optional<std::string>& id, const OpenAIError& e);

// A stats message from the snapshot `now`, with rates and means over the
// interval since `before` (elapsed_s seconds): generation/prompt tokens per
// second, mean TTFT and ITL (null when nothing was observed).
std::string ws_stats_message(const EngineStats& now, const EngineStats& before, double elapsed_s);

}  // namespace pagoda
