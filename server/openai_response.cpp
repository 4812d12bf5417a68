#include "server/openai_response.h"

#include <algorithm>
#include <utility>

#include "engine/output_channel.h"

namespace pagoda {

// ordered_json: keys in the order written (vLLM's field order), so that
// top logprobs keep their rank order (openai_logprobs.h).
using json = nlohmann::ordered_json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

// With --enable-prompt-tokens-details, usage's "prompt_tokens_details":
// {"cached_tokens": n}. vLLM adds it when n is non-zero; here also when 0,
// as OpenAI's API does, so a client reads one shape.
json usage_json(const ParsedRequest& req, int64_t prompt_tokens, int64_t completion_tokens,
                int64_t cached_tokens) {
  json u = usage_json(prompt_tokens, completion_tokens);
  if (req.prompt_tokens_details) u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return u;
}

json finish_reason_json(const ChoiceDelta& out) {
  if (!out.finished || out.finish_reason == FinishReason::kNone) return nullptr;
  return finish_reason_name(out);  // "tool_calls" once the parser found a call
}

// A non-streamed chat message: vLLM's ChatMessage, with "tool_calls" always
// (empty without calls) and content null when calls left no text.
json chat_message(const ParsedRequest& req, const ChoiceDelta& c) {
  json calls = json::array();
  for (const nlohmann::json& d : c.tool_calls) {
    json call = d;
    call.erase("index");
    calls.push_back(std::move(call));
  }
  // tool_choice "required" / named: vLLM's content is "".
  json content = req.forced_tool.kind != ForcedToolChoice::Kind::kNone ? json(c.text)
                 : c.tools_called && c.text.empty()                    ? json(nullptr)
                                                                       : json(c.text);
  return {{"role", req.response_role},
          {"content", std::move(content)},
          {"tool_calls", std::move(calls)}};
}

int64_t total_prompt_tokens(const ParsedRequest& req) {
  int64_t n = 0;
  for (const PromptInput& p : req.prompts) n += static_cast<int64_t>(p.token_ids.size());
  if (req.prompts.empty()) n = static_cast<int64_t>(req.prompt_token_ids.size());
  return n;
}

const std::vector<int32_t>& prompt_ids_of(const ParsedRequest& req, int index) {
  const PromptInput* p = prompt_of(req, index);
  return p ? p->token_ids : req.prompt_token_ids;
}

const char* object_name(const ParsedRequest& req, bool stream) {
  if (req.kind == ApiKind::kChat) return stream ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

}  // namespace

std::string sse_event(const json& payload) { return "data: " + dump(payload) + "\n\n"; }

const char* stream_content_type(const ParsedRequest& req) {
  return req.kind == ApiKind::kGenerate ? "application/json" : "text/event-stream; charset=utf-8";
}

json completion_response(const ParsedRequest& req, const std::vector<ChoiceDelta>& choices) {
  if (req.kind == ApiKind::kGenerate) {
    json texts = json::array();
    for (const ChoiceDelta& c : choices) texts.push_back(c.text);
    return {{"text", std::move(texts)}};
  }
  json out_choices = json::array();
  int64_t completion_tokens = 0;
  for (const ChoiceDelta& c : choices) {
    completion_tokens += c.completion_tokens;
    json choice = {{"index", c.index}};
    if (req.kind == ApiKind::kChat) {
      choice["message"] = chat_message(req, c);
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = c.logprobs;
    // tool_choice "required" / named: vLLM's non-streamed finish_reason is
    // the engine's ("stop", "length"), not "tool_calls" (streamed it is).
    if (req.forced_tool.kind != ForcedToolChoice::Kind::kNone && c.finished &&
        c.finish_reason != FinishReason::kNone)
      choice["finish_reason"] = finish_reason_str(c.finish_reason);
    else
      choice["finish_reason"] = finish_reason_json(c);
    choice["stop_reason"] = c.stop_reason;
    // vLLM: completions carry prompt_logprobs in each choice (chat: at the
    // top level, below).
    if (req.kind == ApiKind::kCompletion && req.sampling.prompt_logprobs)
      choice["prompt_logprobs"] = c.prompt_logprobs;
    if (req.return_token_ids) {
      choice["prompt_token_ids"] = prompt_ids_of(req, c.index);
      choice["token_ids"] = c.token_ids;
    }
    out_choices.push_back(std::move(choice));
  }
  json out = {{"id", req.request_id},
              {"object", object_name(req, false)},
              {"created", req.created},
              {"model", req.model},
              {"choices", std::move(out_choices)},
              {"usage", usage_json(req, total_prompt_tokens(req), completion_tokens,
                                   cached_tokens(req, choices))}};
  if (req.kind == ApiKind::kChat && req.sampling.prompt_logprobs)
    out["prompt_logprobs"] = choices.empty() ? json(nullptr) : choices.front().prompt_logprobs;
  return out;
}

json completion_response(const ParsedRequest& req, const std::vector<RequestOutput>& choices) {
  // In choice order, so a prompt's logprobs (on its first choice's output)
  // reach the choices after it; each choice's whole output as assembled.
  std::vector<const RequestOutput*> ordered;
  for (const RequestOutput& c : choices) ordered.push_back(&c);
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const RequestOutput* a, const RequestOutput* b) { return a->index < b->index; });
  ChoiceAssembler a(req);
  std::vector<ChoiceDelta> assembled;
  for (const RequestOutput* c : ordered) assembled.push_back(a.add(*c));
  for (ChoiceDelta& c : assembled)
    if (c.index >= 0 && static_cast<size_t>(c.index) < a.choices().size())
      c.prompt_logprobs = a.choices()[static_cast<size_t>(c.index)].prompt_logprobs;
  return completion_response(req, assembled);
}

json completion_response(const ParsedRequest& req, const RequestOutput& merged) {
  return completion_response(req, std::vector<RequestOutput>{merged});
}

OpenAIError error_for_output(const RequestOutput& out) {
  return make_error(out.error_status, out.error.empty() ? "request failed" : out.error);
}

OpenAIError error_for_output(const ChoiceDelta& out) {
  return make_error(out.error_status, out.error.empty() ? "request failed" : out.error);
}

StreamFormatter::StreamFormatter(const ParsedRequest& req) : req_(req) {
  choices_.resize(static_cast<size_t>(std::max(1, req.num_choices())));
  for (size_t i = 0; i < choices_.size(); ++i)
    choices_[i].prompt_tokens =
        static_cast<int64_t>(prompt_ids_of(req, static_cast<int>(i)).size());
}

json StreamFormatter::chunk(json choice) const {
  json c = {{"id", req_.request_id},
            {"object", object_name(req_, true)},
            {"created", req_.created},
            {"model", req_.model},
            {"choices", json::array({std::move(choice)})}};
  if (req_.include_usage) {
    c["usage"] = nullptr;
    if (req_.continuous_usage_stats) {
      // vLLM (serving_completion.py / serving_chat.py): the chunk's choice's
      // prompt tokens and its completion tokens so far.
      const Choice& st = choices_[c["choices"][0]["index"].get<size_t>()];
      c["usage"] = usage_json(req_, st.prompt_tokens, st.completion_tokens, st.num_cached_tokens);
    }
  }
  return c;
}

std::string StreamFormatter::begin() {
  std::string out;
  if (req_.kind != ApiKind::kChat) return out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    out += sse_event(chunk({{"index", static_cast<int>(i)},
                            {"delta", {{"role", req_.response_role}, {"content", ""}}},
                            {"logprobs", nullptr},
                            {"finish_reason", nullptr}}));
  }
  return out;
}

std::string StreamFormatter::generate_update() const {
  json texts = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    // vLLM's /generate: prompt + text so far for every choice, also one
    // that has produced nothing yet (its first delta brings the prompt).
    const PromptInput* p = prompt_of(req_, static_cast<int>(i));
    texts.push_back(choices_[i].received || !p ? choices_[i].text : p->text);
  }
  std::string s = dump(json{{"text", std::move(texts)}});
  s.push_back('\0');
  return s;
}

std::string StreamFormatter::finish_stream() {
  done_ = true;
  if (req_.kind == ApiKind::kGenerate) return "";
  std::string out;
  if (req_.include_usage) {
    int64_t completion_tokens = 0;
    for (const Choice& c : choices_) completion_tokens += c.completion_tokens;
    std::vector<ChoiceDelta> cached(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i) {
      cached[i].index = static_cast<int>(i);
      cached[i].num_cached_tokens = choices_[i].num_cached_tokens;
    }
    json c = {{"id", req_.request_id},
              {"object", object_name(req_, true)},
              {"created", req_.created},
              {"model", req_.model},
              {"choices", json::array()},
              {"usage", usage_json(req_, total_prompt_tokens(req_), completion_tokens,
                                   cached_tokens(req_, cached))}};
    out += sse_event(c);
  }
  return out + kSseDone;
}

std::string StreamFormatter::format_one(const ChoiceDelta& d) {
  if (done_) return "";
  if (!d.error.empty()) {
    done_ = true;
    if (req_.kind == ApiKind::kGenerate) {
      std::string s = error_for_output(d).body();
      s.push_back('\0');
      return s;
    }
    return sse_event(error_for_output(d).to_json()) + kSseDone;
  }
  if (d.index < 0 || static_cast<size_t>(d.index) >= choices_.size()) return "";
  Choice& st = choices_[static_cast<size_t>(d.index)];
  if (st.finished) return "";
  st.completion_tokens = d.completion_tokens;
  st.num_cached_tokens = std::max(st.num_cached_tokens, d.num_cached_tokens);
  st.text += d.text;
  st.received = true;
  if (d.finished) {
    st.finished = true;
    ++finished_count_;
  }
  std::string out;
  if (req_.kind == ApiKind::kGenerate) {
    if (!d.text.empty() || d.finished) out += generate_update();
  } else if (!d.text.empty() || !d.tool_calls.empty() || d.finished ||
             ((req_.return_token_ids || !d.logprobs.is_null()) && !d.token_ids.empty())) {
    json choice = {{"index", d.index}};
    if (req_.kind == ApiKind::kChat) {
      choice["delta"] = d.text.empty() ? json::object() : json{{"content", d.text}};
      if (!d.tool_calls.empty()) choice["delta"]["tool_calls"] = d.tool_calls;
    } else {
      choice["text"] = d.text;
    }
    choice["logprobs"] = d.logprobs;
    choice["finish_reason"] = finish_reason_json(d);
    if (d.finished) choice["stop_reason"] = d.stop_reason;
    if (req_.return_token_ids) choice["token_ids"] = d.token_ids;
    out += sse_event(chunk(std::move(choice)));
  }
  if (finished_count_ == static_cast<int>(choices_.size())) out += finish_stream();
  return out;
}

std::string StreamFormatter::format(const std::vector<ChoiceDelta>& deltas) {
  // Coalesce runs of one choice's deltas: a slow reader gets fewer, larger
  // chunks.
  std::string out;
  size_t i = 0;
  while (i < deltas.size()) {
    ChoiceDelta merged = deltas[i];
    size_t j = i + 1;
    while (j < deltas.size() && deltas[j].index == merged.index && !merged.finished &&
           merged.error.empty()) {
      append_choice_delta(merged, deltas[j]);
      ++j;
    }
    out += format_one(merged);
    i = j;
  }
  return out;
}

}  // namespace pagoda
