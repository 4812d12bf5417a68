#include "server/openai_response.h"

#include <utility>

#include "engine/output_channel.h"
#include "server/openai_prompt_logprobs.h"

namespace pagoda {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json finish_reason_json(const RequestOutput& out) {
  if (!out.finished || out.finish_reason == FinishReason::kNone) return nullptr;
  return finish_reason_str(out.finish_reason);
}

int64_t total_prompt_tokens(const ParsedRequest& req) {
  int64_t n = 0;
  for (const PromptInput& p : req.prompts) n += static_cast<int64_t>(p.token_ids.size());
  if (req.prompts.empty()) n = static_cast<int64_t>(req.prompt_token_ids.size());
  return n;
}

const PromptInput* prompt_of(const ParsedRequest& req, int index) {
  size_t i = static_cast<size_t>(index / std::max(1, req.sampling.n));
  return i < req.prompts.size() ? &req.prompts[i] : nullptr;
}

const std::vector<int32_t>& prompt_ids_of(const ParsedRequest& req, int index) {
  const PromptInput* p = prompt_of(req, index);
  return p ? p->token_ids : req.prompt_token_ids;
}

std::string echo_text(const ParsedRequest& req, int index) {
  if (!req.echo && req.kind != ApiKind::kGenerate) return "";
  const PromptInput* p = prompt_of(req, index);
  return p ? p->text : "";
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

json stop_reason_json(const RequestOutput& out) {
  if (out.stop_str) return *out.stop_str;
  if (out.stop_token_id) return *out.stop_token_id;
  return nullptr;
}

json completion_response(const ParsedRequest& req, const std::vector<RequestOutput>& choices) {
  if (req.kind == ApiKind::kGenerate) {
    json texts = json::array();
    for (const RequestOutput& c : choices) texts.push_back(echo_text(req, c.index) + c.text);
    return {{"text", std::move(texts)}};
  }
  json out_choices = json::array();
  int64_t completion_tokens = 0;
  for (const RequestOutput& c : choices) {
    completion_tokens += c.completion_tokens;
    json choice = {{"index", c.index}};
    std::string prefix = req.kind == ApiKind::kChat ? "" : echo_text(req, c.index);
    if (req.kind == ApiKind::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = prefix + c.text;
    }
    choice["logprobs"] = nullptr;
    const std::vector<PromptLogprob>* plp =
        req.sampling.prompt_logprobs ? find_prompt_logprobs(choices, c.index, req.sampling.n)
                                     : nullptr;
    if (req.sampling.logprobs && req.tokenizer) {
      if (req.kind == ApiKind::kCompletion && req.echo && plp) {
        // vLLM: the echoed prompt's tokens first, then the completion's.
        int64_t offset = 0;
        json lps = echo_logprobs_json(*req.tokenizer, prompt_ids_of(req, c.index), *plp, &offset);
        ChoiceLogprobs lp(*req.tokenizer, prompt_ids_of(req, c.index), offset);
        append_logprobs_json(lps, lp.completion(c.logprobs));
        choice["logprobs"] = std::move(lps);
      } else {
        ChoiceLogprobs lp(*req.tokenizer, prompt_ids_of(req, c.index), utf8_length(prefix));
        choice["logprobs"] = req.kind == ApiKind::kChat ? lp.chat(c.logprobs) : lp.completion(c.logprobs);
      }
    }
    choice["finish_reason"] = finish_reason_json(c);
    choice["stop_reason"] = stop_reason_json(c);
    // vLLM: completions carry prompt_logprobs in each choice (chat: at the
    // top level, below).
    if (req.kind == ApiKind::kCompletion && req.sampling.prompt_logprobs && req.tokenizer)
      choice["prompt_logprobs"] = plp ? prompt_logprobs_json(*req.tokenizer, *plp) : json(nullptr);
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
              {"usage", usage_json(total_prompt_tokens(req), completion_tokens)}};
  if (req.kind == ApiKind::kChat && req.sampling.prompt_logprobs && req.tokenizer) {
    const std::vector<PromptLogprob>* plp = find_prompt_logprobs(choices, 0, req.sampling.n);
    out["prompt_logprobs"] = plp ? prompt_logprobs_json(*req.tokenizer, *plp) : json(nullptr);
  }
  return out;
}

json completion_response(const ParsedRequest& req, const RequestOutput& merged) {
  return completion_response(req, std::vector<RequestOutput>{merged});
}

OpenAIError error_for_output(const RequestOutput& out) {
  return make_error(out.error_status, out.error.empty() ? "request failed" : out.error);
}

StreamFormatter::StreamFormatter(const ParsedRequest& req) : req_(req) {
  choices_.resize(static_cast<size_t>(std::max(1, req.num_choices())));
  prompt_logprobs_.resize(std::max<size_t>(1, req.prompts.size()));
  for (size_t i = 0; i < choices_.size(); ++i) {
    int index = static_cast<int>(i);
    if (req.sampling.logprobs && req.tokenizer)
      choices_[i].logprobs = std::make_unique<ChoiceLogprobs>(*req.tokenizer, prompt_ids_of(req, index),
                                                              utf8_length(echo_text(req, index)));
  }
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
      int index = c["choices"][0]["index"].get<int>();
      c["usage"] = usage_json(static_cast<int64_t>(prompt_ids_of(req_, index).size()),
                              choices_[static_cast<size_t>(index)].completion_tokens);
    }
  }
  return c;
}

bool StreamFormatter::echo_with_logprobs() const {
  return req_.kind == ApiKind::kCompletion && req_.echo && req_.sampling.logprobs && req_.tokenizer;
}

std::string StreamFormatter::begin() {
  std::string out;
  if (req_.kind == ApiKind::kGenerate) return out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    int index = static_cast<int>(i);
    if (req_.kind == ApiKind::kChat) {
      out += sse_event(chunk({{"index", index},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}));
    } else if (req_.echo && !echo_with_logprobs()) {
      out += sse_event(chunk({{"index", index},
                              {"text", echo_text(req_, index)},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}));
    }
  }
  return out;
}

std::string StreamFormatter::generate_update() const {
  json texts = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) texts.push_back(echo_text(req_, static_cast<int>(i)) + choices_[i].text);
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
    json c = {{"id", req_.request_id},
              {"object", object_name(req_, true)},
              {"created", req_.created},
              {"model", req_.model},
              {"choices", json::array()},
              {"usage", usage_json(total_prompt_tokens(req_), completion_tokens)}};
    out += sse_event(c);
  }
  return out + kSseDone;
}

std::string StreamFormatter::format_one(const RequestOutput& d) {
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
  const size_t prompt = static_cast<size_t>(d.index / std::max(1, req_.sampling.n));
  if (d.prompt_logprobs && prompt < prompt_logprobs_.size())
    prompt_logprobs_[prompt] = d.prompt_logprobs;
  const bool echo_first = echo_with_logprobs() && !st.echoed;
  st.completion_tokens = d.completion_tokens;
  st.text += d.text;
  if (d.finished) {
    st.finished = true;
    ++finished_count_;
  }
  std::string out;
  if (req_.kind == ApiKind::kGenerate) {
    if (!d.text.empty() || d.finished) out += generate_update();
  } else if (echo_first || !d.text.empty() || d.finished || (req_.return_token_ids && !d.token_ids.empty()) ||
             !d.logprobs.empty()) {
    json choice = {{"index", d.index}};
    if (req_.kind == ApiKind::kChat) {
      choice["delta"] = d.text.empty() ? json::object() : json{{"content", d.text}};
    } else {
      choice["text"] = echo_first ? echo_text(req_, d.index) + d.text : d.text;
    }
    choice["logprobs"] = nullptr;
    if (echo_first) {
      // The prompt's entries, then this delta's; later deltas' offsets go on
      // from there.
      st.echoed = true;
      const std::vector<int32_t>& ids = prompt_ids_of(req_, d.index);
      const bool have = prompt < prompt_logprobs_.size() && prompt_logprobs_[prompt];
      const std::vector<PromptLogprob>* plp = have ? &*prompt_logprobs_[prompt] : nullptr;
      int64_t offset = utf8_length(echo_text(req_, d.index));
      json lps = plp ? echo_logprobs_json(*req_.tokenizer, ids, *plp, &offset)
                     : json{{"tokens", json::array()},
                            {"token_logprobs", json::array()},
                            {"top_logprobs", json::array()},
                            {"text_offset", json::array()}};
      st.logprobs = std::make_unique<ChoiceLogprobs>(*req_.tokenizer, ids, offset);
      append_logprobs_json(lps, st.logprobs->completion(d.logprobs));
      choice["logprobs"] = std::move(lps);
    } else if (st.logprobs) {
      choice["logprobs"] = req_.kind == ApiKind::kChat ? st.logprobs->chat(d.logprobs) : st.logprobs->completion(d.logprobs);
    }
    choice["finish_reason"] = finish_reason_json(d);
    if (d.finished) choice["stop_reason"] = stop_reason_json(d);
    if (req_.return_token_ids) choice["token_ids"] = d.token_ids;
    out += sse_event(chunk(std::move(choice)));
  }
  if (finished_count_ == static_cast<int>(choices_.size())) out += finish_stream();
  return out;
}

std::string StreamFormatter::format(const std::vector<RequestOutput>& deltas) {
  // Coalesce runs of one choice's deltas: a slow reader gets fewer, larger
  // chunks.
  std::string out;
  size_t i = 0;
  while (i < deltas.size()) {
    RequestOutput merged = deltas[i];
    size_t j = i + 1;
    while (j < deltas.size() && deltas[j].index == merged.index && !merged.finished && merged.error.empty()) {
      merge_delta(merged, deltas[j]);
      ++j;
    }
    out += format_one(merged);
    i = j;
  }
  return out;
}

}  // namespace pagoda
