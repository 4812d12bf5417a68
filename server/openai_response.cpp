#include "server/openai_response.h"

#include <utility>

namespace pagoda {

using nlohmann::json;

std::string sse_event(const json& payload) { return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n"; }

json stop_reason_json(const RequestOutput& out) {
  if (out.stop_str) return *out.stop_str;
  if (out.stop_token_id) return *out.stop_token_id;
  return nullptr;
}

namespace {

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json finish_reason_json(const RequestOutput& out) {
  if (!out.finished || out.finish_reason == FinishReason::kNone) return nullptr;
  return finish_reason_str(out.finish_reason);
}

int64_t prompt_tokens_of(const ParsedRequest& req, const RequestOutput& out) {
  return out.prompt_tokens > 0 ? out.prompt_tokens : static_cast<int64_t>(req.prompt_token_ids.size());
}

}  // namespace

json completion_response(const ParsedRequest& req, const RequestOutput& merged) {
  json choice = {{"index", merged.index}};
  if (req.kind == ApiKind::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", merged.text}};
  } else {
    choice["text"] = merged.text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_json(merged);
  choice["stop_reason"] = stop_reason_json(merged);
  if (req.return_token_ids) {
    choice["prompt_token_ids"] = req.prompt_token_ids;
    choice["token_ids"] = merged.token_ids;
  }
  return {{"id", req.request_id},
          {"object", req.kind == ApiKind::kChat ? "chat.completion" : "text_completion"},
          {"created", req.created},
          {"model", req.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(prompt_tokens_of(req, merged), merged.completion_tokens)}};
}

OpenAIError error_for_output(const RequestOutput& out) {
  return bad_request(out.error.empty() ? "request failed" : out.error);
}

json StreamFormatter::chunk(json choice) const {
  json c = {{"id", req_.request_id},
            {"object", req_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", req_.created},
            {"model", req_.model},
            {"choices", json::array({std::move(choice)})}};
  if (req_.include_usage) c["usage"] = nullptr;
  return c;
}

std::string StreamFormatter::begin() {
  if (req_.kind != ApiKind::kChat) return "";
  return sse_event(chunk({{"index", 0},
                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                          {"logprobs", nullptr},
                          {"finish_reason", nullptr}}));
}

std::string StreamFormatter::format_one(const RequestOutput& d) {
  if (done_) return "";
  if (!d.error.empty()) {
    done_ = true;
    return sse_event(error_for_output(d).to_json()) + kSseDone;
  }
  std::string out;
  if (!d.text.empty() || d.finished || (req_.return_token_ids && !d.token_ids.empty())) {
    json choice = {{"index", d.index}};
    if (req_.kind == ApiKind::kChat) {
      choice["delta"] = d.text.empty() ? json::object() : json{{"content", d.text}};
    } else {
      choice["text"] = d.text;
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason_json(d);
    if (d.finished) choice["stop_reason"] = stop_reason_json(d);
    if (req_.return_token_ids) choice["token_ids"] = d.token_ids;
    out += sse_event(chunk(std::move(choice)));
  }
  if (d.finished) {
    done_ = true;
    if (req_.include_usage) {
      json c = {{"id", req_.request_id},
                {"object", req_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
                {"created", req_.created},
                {"model", req_.model},
                {"choices", json::array()},
                {"usage", usage_json(prompt_tokens_of(req_, d), d.completion_tokens)}};
      out += sse_event(c);
    }
    out += kSseDone;
  }
  return out;
}

std::string StreamFormatter::format(const std::vector<RequestOutput>& deltas) {
  if (deltas.empty()) return "";
  // Coalesce: the batch becomes one chunk (its texts joined, the last
  // delta's finish fields), so a slow reader gets fewer, larger chunks.
  RequestOutput merged = deltas.front();
  for (size_t i = 1; i < deltas.size() && !merged.finished; ++i) {
    const RequestOutput& d = deltas[i];
    merged.text += d.text;
    merged.token_ids.insert(merged.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    merged.finished = d.finished;
    merged.finish_reason = d.finish_reason;
    merged.stop_str = d.stop_str;
    merged.stop_token_id = d.stop_token_id;
    merged.error = d.error;
    merged.prompt_tokens = d.prompt_tokens;
    merged.completion_tokens = d.completion_tokens;
  }
  return format_one(merged);
}

}  // namespace pagoda
