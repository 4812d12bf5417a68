#include "server/choice_output.h"

#include <algorithm>
#include <utility>

#include "server/openai_prompt_logprobs.h"

namespace pagoda {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

bool echoes(const ParsedRequest& req) {
  return req.kind == ApiKind::kGenerate || (req.kind == ApiKind::kCompletion && req.echo);
}

// Both wire formats are objects of arrays: concatenate each array.
void append_logprobs(ordered_json& into, const ordered_json& next) {
  if (next.is_null()) return;
  if (into.is_null()) {
    into = next;
    return;
  }
  for (auto it = next.begin(); it != next.end(); ++it) {
    ordered_json& dst = into[it.key()];
    if (!dst.is_array()) dst = ordered_json::array();
    for (const ordered_json& v : it.value()) dst.push_back(v);
  }
}

// Tool-call deltas merged by index: a new call appended, a known one's
// arguments concatenated.
void append_tool_call_deltas(json& into, const json& next) {
  for (const json& d : next) {
    json* call = nullptr;
    for (json& c : into)
      if (c["index"] == d["index"]) call = &c;
    if (!call) {
      into.push_back(d);
      continue;
    }
    if (auto a = d.find("function"); a != d.end() && a->contains("arguments")) {
      std::string& args = (*call)["function"]["arguments"].get_ref<std::string&>();
      args += (*a)["arguments"].get<std::string>();
    }
  }
}

}  // namespace

json tool_call_deltas_json(const std::vector<ToolCallDelta>& calls) {
  json out = json::array();
  for (const ToolCallDelta& c : calls) {
    json d = {{"index", c.index}};
    if (!c.id.empty()) {
      d["id"] = c.id;
      d["type"] = "function";
      d["function"] = {{"name", c.name}, {"arguments", c.arguments}};
    } else {
      d["function"] = {{"arguments", c.arguments}};
    }
    out.push_back(std::move(d));
  }
  return out;
}

const char* finish_reason_name(const ChoiceDelta& c) {
  if (c.tools_called && c.finish_reason != FinishReason::kAbort &&
      c.finish_reason != FinishReason::kNone)
    return "tool_calls";
  return finish_reason_str(c.finish_reason);
}

void append_choice_delta(ChoiceDelta& into, const ChoiceDelta& next) {
  into.text += next.text;
  append_tool_call_deltas(into.tool_calls, next.tool_calls);
  // The parser's latest word: a call it started can turn out not to parse
  // (`<tool_call>not json</tool_call>` goes back to content), and then no
  // call was made. vLLM: finish_reason "tool_calls" only when calls were
  // parsed, streamed or not. An error delta carries no parser state.
  into.tools_called = next.error.empty() ? next.tools_called : into.tools_called;
  into.token_ids.insert(into.token_ids.end(), next.token_ids.begin(), next.token_ids.end());
  append_logprobs(into.logprobs, next.logprobs);
  if (!next.prompt_logprobs.is_null()) into.prompt_logprobs = next.prompt_logprobs;
  into.engine_deltas += next.engine_deltas;
  into.prompt_tokens = next.prompt_tokens;
  into.completion_tokens = next.completion_tokens;
  into.num_cached_tokens = std::max(into.num_cached_tokens, next.num_cached_tokens);
  if (next.finished || !next.error.empty()) {
    into.finished = next.finished;
    into.finish_reason = next.finish_reason;
    into.stop_reason = next.stop_reason;
    into.error = next.error;
    into.error_status = next.error_status;
  }
}

json stop_reason_json(const RequestOutput& out) {
  if (out.stop_str) return *out.stop_str;
  if (out.stop_token_id) return *out.stop_token_id;
  return nullptr;
}

int64_t cached_tokens(const ParsedRequest& req, const std::vector<ChoiceDelta>& choices) {
  const int n = std::max(1, req.sampling.n);
  std::vector<int64_t> per_prompt;
  for (const ChoiceDelta& c : choices) {
    if (c.index < 0) continue;
    const auto p = static_cast<size_t>(c.index / n);
    if (p >= per_prompt.size()) per_prompt.resize(p + 1, 0);
    per_prompt[p] = std::max(per_prompt[p], c.num_cached_tokens);
  }
  int64_t total = 0;
  for (int64_t v : per_prompt) total += v;
  return total;
}

const PromptInput* prompt_of(const ParsedRequest& req, int index) {
  if (index < 0) return nullptr;
  size_t i = static_cast<size_t>(index / std::max(1, req.sampling.n));
  return i < req.prompts.size() ? &req.prompts[i] : nullptr;
}

ChoiceAssembler::ChoiceAssembler(const ParsedRequest& req) : req_(req) {
  const size_t n = static_cast<size_t>(std::max(1, req.num_choices()));
  state_.resize(n);
  choices_.resize(n);
  prompt_lps_.resize(std::max<size_t>(1, req.prompts.size()));
  for (size_t i = 0; i < n; ++i) {
    const int index = static_cast<int>(i);
    const PromptInput* p = prompt_of(req, index);
    ChoiceDelta& c = choices_[i];
    c.index = index;
    c.engine_deltas = 0;
    c.prompt_tokens = p ? static_cast<int64_t>(p->token_ids.size())
                        : static_cast<int64_t>(req.prompt_token_ids.size());
    if (req.kind == ApiKind::kChat && req.forced_tool.kind != ForcedToolChoice::Kind::kNone)
      state_[i].forced = std::make_unique<ForcedToolCalls>(
          req.forced_tool, [] { return make_request_id("chatcmpl-tool-"); });
    else if (req.kind == ApiKind::kChat && req.tool_parser != ToolParserKind::kNone)
      state_[i].tools = std::make_unique<ToolCallParser>(
          req.tool_parser, [] { return make_request_id("chatcmpl-tool-"); });
    if (req.sampling.logprobs && req.tokenizer) {
      const std::vector<int32_t>& context = p ? p->token_ids : req.prompt_token_ids;
      const int64_t offset = echoes(req) && p ? utf8_length(p->text) : 0;
      state_[i].logprobs = std::make_unique<ChoiceLogprobs>(*req.tokenizer, context, offset);
      // A choice that ends before any token still answers the empty object.
      c.logprobs = req.kind == ApiKind::kChat ? state_[i].logprobs->chat({})
                                              : state_[i].logprobs->completion({});
    }
  }
}

ChoiceDelta ChoiceAssembler::add(const RequestOutput& d) {
  ChoiceDelta out;
  out.index = d.index;
  out.token_ids = d.token_ids;
  out.finished = d.finished || !d.error.empty();
  out.finish_reason = out.finished ? d.finish_reason : FinishReason::kNone;
  out.stop_reason = stop_reason_json(d);
  out.completion_tokens = d.completion_tokens;
  out.prompt_tokens = d.prompt_tokens;
  out.num_cached_tokens = d.num_cached_tokens;
  out.error = d.error;
  out.error_status = d.error_status;
  const bool in_range = d.index >= 0 && static_cast<size_t>(d.index) < choices_.size();
  if (!in_range || !d.error.empty()) {
    out.text = d.text;
    return out;
  }
  State& st = state_[static_cast<size_t>(d.index)];
  ChoiceDelta& choice = choices_[static_cast<size_t>(d.index)];
  out.prompt_tokens = choice.prompt_tokens;
  const size_t prompt = static_cast<size_t>(d.index / std::max(1, req_.sampling.n));
  if (d.prompt_logprobs && prompt < prompt_lps_.size() && req_.tokenizer) {
    prompt_lps_[prompt] = *d.prompt_logprobs;
    const ordered_json list = prompt_logprobs_json(*req_.tokenizer, *d.prompt_logprobs);
    for (ChoiceDelta& c : choices_)
      if (static_cast<size_t>(c.index / std::max(1, req_.sampling.n)) == prompt)
        c.prompt_logprobs = list;
    out.prompt_logprobs = list;
  }
  ordered_json echoed_lps;
  std::vector<WithdrawnCall> withdrawn;
  if (req_.kind == ApiKind::kChat && !req_.chat_echo.empty() && !st.echoed) {
    out.text = req_.chat_echo;
    st.echoed = true;
  }
  if (echoes(req_) && !st.echoed) {
    const PromptInput* p = prompt_of(req_, d.index);
    if (p) out.text = p->text;
    echoed_lps = echo_logprobs(d.index, st);
    st.echoed = true;
  }
  if (req_.echo_without_generation) {
    // The prompt alone: the one token the engine ran is not shown.
    out.token_ids.clear();
    if (st.logprobs)
      out.logprobs = echoed_lps.is_null() ? st.logprobs->completion({}) : std::move(echoed_lps);
  } else {
    if (st.forced) {
      ToolParseResult r = st.forced->feed(d.text);
      out.tool_calls = tool_call_deltas_json(r.calls);
      out.tools_called = st.forced->called();
    } else if (st.tools) {
      ToolParseResult r = st.tools->feed(d.text);
      if (out.finished) {
        ToolParseResult rest = st.tools->finish();
        for (WithdrawnCall& w : rest.withdrawn) {
          w.offset += r.content.size();
          r.withdrawn.push_back(std::move(w));
        }
        r.content += rest.content;
        for (ToolCallDelta& c : rest.calls) r.calls.push_back(std::move(c));
      }
      for (WithdrawnCall& w : r.withdrawn) w.offset += out.text.size();
      out.text += r.content;
      out.tool_calls = tool_call_deltas_json(r.calls);
      out.tools_called = st.tools->called();
      withdrawn = std::move(r.withdrawn);
    } else {
      out.text += d.text;
    }
    if (st.logprobs) {
      out.logprobs = req_.kind == ApiKind::kChat ? st.logprobs->chat(d.logprobs)
                                                 : st.logprobs->completion(d.logprobs);
      if (!echoed_lps.is_null()) {
        append_logprobs_json(echoed_lps, out.logprobs);
        out.logprobs = std::move(echoed_lps);
      }
    }
  }
  if (choice.engine_deltas == 0 && !out.logprobs.is_null())
    choice.logprobs = nullptr;  // replaced by the first delta's
  const size_t text_base = choice.text.size();
  append_choice_delta(choice, out);
  // Calls that turned out not to be calls (tool_call_parser.h): the stream
  // sent their deltas; the whole choice drops them and has their text as
  // content where it was written.
  size_t inserted = 0;
  for (const WithdrawnCall& w : withdrawn) {
    json& calls = choice.tool_calls;
    calls.erase(std::remove_if(calls.begin(), calls.end(),
                               [&](const json& c) { return c["index"] == w.index; }),
                calls.end());
    choice.text.insert(text_base + inserted + w.offset, w.text);
    inserted += w.text.size();
  }
  if (out.finished && st.forced && req_.forced_tool.kind == ForcedToolChoice::Kind::kRequired) {
    std::string error;
    if (auto calls = st.forced->final_calls(&error))
      choice.tool_calls = tool_call_deltas_json(*calls);
    else
      choice.tool_call_error = std::move(error);
  }
  return out;
}

ordered_json ChoiceAssembler::echo_logprobs(int index, State& st) {
  if (req_.kind != ApiKind::kCompletion || !st.logprobs || !req_.tokenizer) return nullptr;
  const size_t prompt = static_cast<size_t>(index / std::max(1, req_.sampling.n));
  const PromptInput* p = prompt_of(req_, index);
  if (!p || prompt >= prompt_lps_.size() || !prompt_lps_[prompt]) return nullptr;
  int64_t offset = 0;
  ordered_json lps =
      echo_logprobs_json(*req_.tokenizer, p->token_ids, *prompt_lps_[prompt], &offset);
  st.logprobs = std::make_unique<ChoiceLogprobs>(*req_.tokenizer, p->token_ids, offset);
  return lps;
}

int64_t ChoiceAssembler::prompt_tokens() const {
  int64_t n = 0;
  for (const PromptInput& p : req_.prompts) n += static_cast<int64_t>(p.token_ids.size());
  if (req_.prompts.empty()) n = static_cast<int64_t>(req_.prompt_token_ids.size());
  return n;
}

int64_t ChoiceAssembler::completion_tokens() const {
  int64_t n = 0;
  for (const ChoiceDelta& c : choices_) n += c.completion_tokens;
  return n;
}

}  // namespace pagoda
