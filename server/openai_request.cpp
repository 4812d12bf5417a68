#include "server/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>

#include "engine/chat/chat_template.h"
#include "server/chat_content_format.h"
#include "server/chat_prompt.h"
#include "server/chat_tools.h"
#include "server/guided_fields.h"
#include "server/openai_fields.h"
#include "server/request_model.h"
#include "server/sampling_checks.h"
#include "server/strict_json.h"

namespace pagoda {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace openai_fields;

std::string make_request_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

json parse_request_body(std::string_view body) {
  std::variant<json, JsonParseFailure> parsed = parse_strict_json(body, "Request body");
  if (auto* f = std::get_if<JsonParseFailure>(&parsed))
    fail(std::move(f->message), std::move(f->param));
  json& obj = std::get<json>(parsed);
  if (!obj.is_object())
    fail(fmt::format("Request body must be a JSON object, got {}", type_name(obj)));
  openai_fields::keep_schema_key_order(obj, body);
  return std::move(obj);
}

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `what`: the field the ids came in ("prompt"; offline: "prompt_token_ids").
std::vector<int32_t> token_ids_from_json(const json& arr, const ServingModel& model,
                                         const char* what = "prompt") {
  std::vector<int32_t> ids;
  int64_t vocab = model.tokenizer ? model.tokenizer->vocab_size() : 0;
  for (const json& t : arr) {
    const std::optional<int64_t> i = openai_fields::as_integer(t);
    if (!i)
      fail(fmt::format("'{}' must be {}a list of token ids; found a {} in the list", what,
                       std::string_view(what) == "prompt" ? "a string or " : "",
                       t.is_number() ? t.dump() : type_name(t)),
           what);
    const int64_t id = *i;
    if (id < 0 || id >= vocab)
      fail(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, vocab), what);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

PromptInput prompt_from_ids(std::vector<int32_t> ids, const ServingModel& model) {
  if (ids.empty()) fail("'prompt' must not be empty", "prompt");
  PromptInput p;
  p.text = model.tokenizer->decode(ids, /*skip_special_tokens=*/false);
  p.token_ids = std::move(ids);
  return p;
}

PromptInput prompt_from_text(const std::string& text, const json& obj, const ServingModel& model,
                             PromptLength length, size_t keep) {
  PromptInput p;
  p.token_ids = encode_prompt_checked(text, get_bool(obj, "add_special_tokens").value_or(true),
                                      model, length, "prompt", keep);
  p.text = text;
  // The engine would refuse it too, but only after a stream's 200 header.
  if (p.token_ids.empty()) fail("The prompt is empty (no tokens)", "prompt");
  return p;
}

}  // namespace

void check_prompt_length_bound(std::string_view text, const ServingModel& model, const char* what) {
  if (!model.tokenizer || model.max_model_len <= 0) return;
  const auto at_least = static_cast<int64_t>(model.tokenizer->min_token_count(text));
  if (at_least >= model.max_model_len)
    fail(fmt::format(
             "This model's maximum context length is {} tokens. However, your request has at "
             "least {} input tokens ({} bytes of text). Please reduce the length of the input {}.",
             model.max_model_len, at_least, text.size(), what),
         what);
}

size_t count_prompts(const json& obj) {
  const json* p = get(obj, "prompt");
  if (!p || !p->is_array() || p->empty()) return 1;
  return (*p)[0].is_string() || (*p)[0].is_array() ? p->size() : 1;
}

void check_seqs_per_request(size_t prompts, int64_t n, const ServingModel& model) {
  const int64_t limit = model.max_seqs_per_request;
  if (limit <= 0) return;
  const auto num_prompts = static_cast<int64_t>(std::min<size_t>(prompts, INT64_MAX / 2));
  if (n > limit)
    fail(fmt::format(
             "n ({}) is more than the server allows per request ({}, --max-seqs-per-request)", n,
             limit),
         "n");
  if (num_prompts > limit / std::max<int64_t>(n, 1))
    fail(fmt::format(
             "The request asks for {} prompts x n={} sequences; the server allows at most {} per "
             "request (--max-seqs-per-request)",
             num_prompts, n, limit),
         "prompt");
}

std::vector<int32_t> encode_prompt_checked(const std::string& text, bool add_special_tokens,
                                           const ServingModel& model, PromptLength length,
                                           const char* what, size_t keep) {
  if (length == PromptLength::kTruncated) {
    auto ids = encode_prompt_tail(*model.tokenizer, text, add_special_tokens, keep);
    if (!ids)
      fail(fmt::format("Cannot truncate the {} to its last {} tokens: it is {} bytes long (over {} "
                       "KiB, too long to tokenize whole), and no space or newline before text in "
                       "its last {} KiB gave a place to cut it where its last {} tokens are known",
                       what, keep, text.size(), kMaxWholeBytes >> 10, kMaxTailBytes >> 10, keep),
           what);
    return std::move(*ids);
  }
  if (model.max_model_len <= 0) return encode_prompt(*model.tokenizer, text, add_special_tokens);
  check_prompt_length_bound(text, model, what);
  if (length == PromptLength::kBounded)
    return encode_prompt(*model.tokenizer, text, add_special_tokens);
  const auto limit = static_cast<size_t>(model.max_model_len);
  std::vector<int32_t> ids =
      encode_prompt_bounded(*model.tokenizer, text, add_special_tokens, limit);
  if (ids.size() > limit)
    fail(fmt::format("This model's maximum context length is {} tokens. However, your request has "
                     "at least {} "
                     "input tokens. Please reduce the length of the input {}.",
                     model.max_model_len, ids.size(), what),
         what);
  return ids;
}

std::vector<PromptInput> completion_prompts(const json& obj, const ServingModel& model,
                                            PromptLength length, size_t keep) {
  const json* p = get(obj, "prompt");
  if (!p) fail("'prompt' is required", "prompt");
  if (p->is_string())
    return {prompt_from_text(p->get_ref<const std::string&>(), obj, model, length, keep)};
  if (!p->is_array())
    fail(fmt::format(
             "'prompt' must be a string, a list of strings, a list of token ids or a list of "
             "token-id lists, got {}",
             type_name(*p)),
         "prompt");
  if (p->empty()) fail("'prompt' must not be empty", "prompt");
  std::vector<PromptInput> out;
  if ((*p)[0].is_string() || (*p)[0].is_array()) {
    const bool strings = (*p)[0].is_string();
    for (const json& item : *p) {
      if (item.is_string() != strings || (!item.is_string() && !item.is_array()))
        fail(fmt::format("'prompt' lists must hold only strings or only token-id lists; found a {}",
                         type_name(item)),
             "prompt");
      if (item.is_string()) {
        out.push_back(
            prompt_from_text(item.get_ref<const std::string&>(), obj, model, length, keep));
      } else if (item.is_array()) {
        out.push_back(prompt_from_ids(token_ids_from_json(item, model), model));
      } else {
        fail(fmt::format("'prompt' lists must hold only strings or only token-id lists; found a {}",
                         type_name(item)),
             "prompt");
      }
    }
    return out;
  }
  out.push_back(prompt_from_ids(token_ids_from_json(*p, model), model));
  return out;
}

namespace {

using request_model::RequestFields;

// truncate_prompt_tokens as vLLM's SamplingParams validates it: >= 1 or -1
// (no model needed).
std::optional<int64_t> checked_truncation(const RequestFields& f) {
  auto k = f.integer("truncate_prompt_tokens");
  if (k && (*k == 0 || *k < -1))
    fail(fmt::format("truncate_prompt_tokens must be an integer >= 1 or -1, got {}", *k),
         "truncate_prompt_tokens");
  return k;
}

// An offline request's max_tokens when it sets none, before the context
// caps it: generation_config.json's max_new_tokens (vLLM's
// get_default_sampling_params), else vLLM SamplingParams' default (16, the
// request model's).
int64_t default_offline_max_tokens(const RequestFields& f, const GenerationConfig& gc) {
  return gc.max_new_tokens.value_or(*f.integer("max_tokens"));
}

// vLLM's SamplingParams: min_tokens <= max_tokens (the requested count, or
// the one the context leaves).
void check_min_tokens(int64_t min_tokens, int64_t max_tokens) {
  if (min_tokens > max_tokens)
    fail(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.", max_tokens,
                     min_tokens),
         "min_tokens");
}

// truncate_prompt_tokens against the model (the renderer: -1 is
// max_model_len, more than max_model_len is an error).
std::optional<int64_t> truncation(const RequestFields& f, const ServingModel& model) {
  auto k = checked_truncation(f);
  if (!k) return std::nullopt;
  if (*k == -1) return model.max_model_len;
  if (*k > model.max_model_len)
    fail(fmt::format("truncate_prompt_tokens ({}) cannot be greater than max_length ({}). Please "
                     "select a smaller "
                     "truncation size.",
                     *k, model.max_model_len),
         "truncate_prompt_tokens");
  return k;
}

// Keeps the last k ids. Text tokenized with add_special_tokens keeps the
// special tokens the tokenizer added (BOS first, EOS last) and takes the
// rest from the text's end, k in all: HF's left truncation
// (tokenizer(text, truncation=True, max_length=k), vLLM's truncation_side
// "left"). Ids sent as ids, or text without added specials: ids[-k:].
void truncate_ids(std::vector<int32_t>& ids, int64_t k, bool added_specials,
                  const ServingModel& model) {
  if (static_cast<int64_t>(ids.size()) <= k) return;
  size_t head = 0, tail = 0;
  if (added_specials) {
    const std::vector<int32_t> specials =
        encode_prompt(*model.tokenizer, "", /*add_special_tokens=*/true);
    const auto bos = model.tokenizer->bos_token_id();
    head = !specials.empty() && bos && specials.front() == *bos ? 1 : 0;
    tail = specials.size() - head;
  }
  std::vector<int32_t> out(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(head));
  // No room for text (k <= the specials): HF removes all of it and keeps
  // the special tokens, cut to k below (k = 1 with BOS: [BOS]).
  const auto body_keep = std::max<std::ptrdiff_t>(
      0, static_cast<std::ptrdiff_t>(k) - static_cast<std::ptrdiff_t>(head + tail));
  const auto body_end = ids.end() - static_cast<std::ptrdiff_t>(tail);
  out.insert(out.end(), body_end - body_keep, body_end);
  out.insert(out.end(), body_end, ids.end());
  out.resize(std::min(out.size(), static_cast<size_t>(k)));
  ids = std::move(out);
}

void check_priority(const RequestFields& f) {
  // vLLM's default FCFS scheduler refuses any other priority (its
  // Processor: "Got priority ... but Priority scheduling is not enabled.").
  if (int64_t priority = *f.integer("priority"); priority != 0)
    fail(fmt::format("Got priority {} but Priority scheduling is not enabled.", priority),
         "priority");
}

// The response id: "<prefix><request_id>" when the request names one (vLLM:
// f"cmpl-{request.request_id}"), else "<prefix><32 random hex digits>".
std::string response_id(const RequestFields& f, std::string_view prefix) {
  if (auto id = f.string("request_id")) return std::string(prefix) + *id;
  return make_request_id(prefix);
}

// The checks across fields (server/sampling_checks.h) with the server's
// max_logprobs, and use_beam_search's parameters: the beams end at the
// model's eos ids (unless ignore_eos) and at stop_token_ids, and the beam
// width is checked again with their number.
void finish_sampling(const RequestFields& f, const ServingModel& model, ParsedRequest& req) {
  const SamplingParams& sp = req.sampling;
  const char* logprobs_param = req.kind == ApiKind::kChat ? "top_logprobs" : "logprobs";
  std::optional<BeamSearchParams> p =
      check_sampling_cross_fields(f, sp, req.echo, logprobs_param, model.max_logprobs);
  if (!p) return;
  if (!sp.ignore_eos) {
    for (int32_t id : model.generation_config.eos_token_ids) p->eos_token_ids.push_back(id);
    if (p->eos_token_ids.empty() && model.tokenizer && model.tokenizer->eos_token_id())
      p->eos_token_ids.push_back(*model.tokenizer->eos_token_id());
  }
  for (int32_t id : sp.stop_token_ids)
    if (std::find(p->eos_token_ids.begin(), p->eos_token_ids.end(), id) == p->eos_token_ids.end())
      p->eos_token_ids.push_back(id);
  check_beam_width(p->beam_width, p->eos_token_ids.size(), sp.best_of ? "best_of" : "n",
                   model.max_logprobs);
  req.beam_search = std::move(p);
}

// Which max_tokens finish_checks holds min_tokens to: the one each prompt
// ends up with (the server's, as vLLM's serving layer builds SamplingParams
// with the context-capped count), or none (offline: vLLM's LLM checks
// min_tokens against max_tokens as given, parse_offline_object).
enum class MinTokensBound { kResolvedMaxTokens, kCheckedBefore };

// What every endpoint finishes with: stream, the checks across fields, the
// first prompt's ids and max_tokens in the request.
void finish_checks(ParsedRequest& req, MinTokensBound bound = MinTokensBound::kResolvedMaxTokens);
void finish_common(const RequestFields& f, const ServingModel& model, ParsedRequest& req) {
  req.stream = *f.boolean("stream");
  finish_checks(req);
  finish_sampling(f, model, req);
}

// finish_common's checks across fields, for a request whose stream is set.
void finish_checks(ParsedRequest& req, MinTokensBound bound) {
  if (req.stream && req.sampling.best_of && *req.sampling.best_of > req.sampling.n)
    fail(fmt::format("best_of > n is not supported with stream=true (best_of={}, n={})",
                     *req.sampling.best_of, req.sampling.n),
         "best_of");
  if (req.stream && req.sampling.prompt_logprobs && *req.sampling.prompt_logprobs > 0)
    fail("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  if (bound == MinTokensBound::kResolvedMaxTokens)
    for (const PromptInput& p : req.prompts)
      check_min_tokens(req.sampling.min_tokens, p.max_tokens);
  req.prompt_token_ids = req.prompts.front().token_ids;
  req.sampling.max_tokens = req.prompts.front().max_tokens;
  req.created = unix_now();
}

// vLLM's cache_salt (a request field; offline, a TextPrompt / TokensPrompt
// key): checked as check_cache_salt_support checks it, then set.
void apply_cache_salt(const RequestFields& f, ParsedRequest& req) {
  if (std::optional<std::string> salt = f.string("cache_salt")) {
    if (salt->empty())
      fail("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    req.cache_salt = std::move(*salt);
  }
}

// The fields /v1/completions and /v1/chat/completions share beyond sampling.
void finish_openai(const RequestFields& f, const ServingModel& model, ParsedRequest& req,
                   std::string_view prefix) {
  req.tokenizer = model.tokenizer;
  check_priority(f);
  finish_common(f, model, req);
  if (const json* so = f.value("stream_options")) {
    // vLLM refuses only a non-empty stream_options without stream.
    if (!req.stream && !(so->is_object() && so->empty()))
      fail("Stream options can only be defined when `stream=True`.", "stream_options");
    req.include_usage = get_bool(*so, "include_usage").value_or(false);
    req.continuous_usage_stats = get_bool(*so, "continuous_usage_stats").value_or(false);
  }
  req.return_token_ids = *f.boolean("return_token_ids");
  apply_cache_salt(f, req);
  req.prompt_tokens_details = model.enable_prompt_tokens_details;
  req.request_id = response_id(f, prefix);
}

RequestFields checked_fields(const json& obj, const request_model::RequestModel& m,
                             ParsedRequest& req) {
  RequestFields f(obj, m);
  req.ignored_fields = f.unknown();
  request_model::warn_unknown_fields(req.ignored_fields);
  return f;
}

}  // namespace

ParseResult parse_completion_request(std::string_view body, const ServingModel& model) {
  try {
    return parse_completion_object(parse_request_body(body), model);
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

ParseResult parse_completion_object(json obj, const ServingModel& model) {
  try {
    ParsedRequest req;
    req.kind = ApiKind::kCompletion;
    RequestFields f = checked_fields(obj, request_model::completion_model(), req);
    req.model = check_model(obj, model);
    parse_sampling(f, model, req.sampling);
    if (auto lp = f.integer("logprobs")) req.sampling.logprobs = static_cast<int>(*lp);
    req.echo = *f.boolean("echo");
    // max_tokens 0 is the prompt alone, with echo only (vLLM's
    // echo_without_generation; SamplingParams refuses 0 otherwise).
    const bool zero_max_tokens = f.has("max_tokens") && *f.integer("max_tokens") == 0;
    if (zero_max_tokens && !req.echo) fail("max_tokens must be at least 1, got 0.", "max_tokens");
    req.echo_without_generation = zero_max_tokens;
    const auto k = truncation(f, model);
    // Counted before anything is tokenized; with truncation a prompt may be
    // longer than the context (it is cut to its last k tokens).
    check_seqs_per_request(count_prompts(obj), req.sampling.n, model);
    req.prompts =
        k ? completion_prompts(obj, model, PromptLength::kTruncated, static_cast<size_t>(*k))
          : completion_prompts(obj, model, PromptLength::kEnforced);
    const bool add_special = *f.boolean("add_special_tokens");
    const json& prompt = obj.at("prompt");
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      PromptInput& p = req.prompts[i];
      if (k) {
        const bool from_text = prompt.is_string() || prompt[i].is_string();
        truncate_ids(p.token_ids, *k, from_text && add_special, model);
        if (!from_text)
          p.text = model.tokenizer->decode(p.token_ids, /*skip_special_tokens=*/false);
      }
      // Unset max_tokens: 16, as vLLM's CompletionRequest and OpenAI's legacy
      // completions, capped by the room left in the context (vLLM's
      // get_max_tokens takes the smaller). Chat keeps max_model_len - prompt.
      const bool requested = f.has("max_tokens");
      p.max_tokens = resolve_max_tokens(req.echo_without_generation ? std::optional<int64_t>(1)
                                        : requested                 ? f.integer("max_tokens")
                                                                    : std::nullopt,
                                        static_cast<int64_t>(p.token_ids.size()),
                                        model.max_model_len, "prompt", "max_tokens");
      if (!requested) p.max_tokens = std::min(p.max_tokens, *f.integer("max_tokens"));
    }
    finish_openai(f, model, req, "cmpl-");
    // Echo with logprobs and no prompt_logprobs: the echoed prompt's
    // logprobs (vLLM's CompletionRequest.to_sampling_params), streamed too
    // (only a requested prompt_logprobs list is refused with stream).
    if (req.echo && req.sampling.logprobs && !req.sampling.prompt_logprobs)
      req.sampling.prompt_logprobs = req.sampling.logprobs;
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

ParseResult parse_generate_request(std::string_view body, const ServingModel& model) {
  try {
    json obj = parse_request_body(body);
    ParsedRequest req;
    req.kind = ApiKind::kGenerate;
    RequestFields f = checked_fields(obj, request_model::generate_model(), req);
    req.model = model.served_model_name;
    req.tokenizer = model.tokenizer;
    parse_sampling(f, model, req.sampling);
    if (auto lp = f.integer("logprobs"); lp && *lp != 0)
      fail("logprobs is not returned by /generate; use /v1/completions", "logprobs");
    if (req.sampling.prompt_logprobs)
      fail("prompt_logprobs is not returned by /generate; use /v1/completions", "prompt_logprobs");
    auto prompt = f.string("prompt");
    if (!prompt) fail("'prompt' is required and must be a string", "prompt");
    check_seqs_per_request(1, req.sampling.n, model);
    const auto k = truncation(f, model);
    req.prompts.push_back(prompt_from_text(*prompt, obj, model,
                                           k ? PromptLength::kTruncated : PromptLength::kEnforced,
                                           k ? static_cast<size_t>(*k) : 0));
    PromptInput& p = req.prompts.front();
    if (k) truncate_ids(p.token_ids, *k, *f.boolean("add_special_tokens"), model);
    p.max_tokens =
        resolve_max_tokens(f.integer("max_tokens"), static_cast<int64_t>(p.token_ids.size()),
                           model.max_model_len, "prompt", "max_tokens");
    finish_common(f, model, req);
    req.request_id = make_request_id("gen-");
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

namespace {

// A chat's own template, the one vLLM renders with
// (vllm/renderers/params.py, ChatParams.get_apply_chat_template_kwargs):
// the request's chat_template unless it is absent, null or "auto", else
// chat_template_kwargs' "chat_template" (not null); none: the server's. It
// is parsed once here, for the content format and for rendering, which
// costs ~100-500 bytes of memory per byte of it and is outside the
// renderer's limits: 64 KiB (real chat templates are under ~20 KiB; a 30 MB
// one took 29 s and 5 GB, found by a fresh-user attack).
struct OwnTemplate {
  std::optional<std::string> source;           // nullopt: the server's template
  std::shared_ptr<const ChatTemplate> parsed;  // null: none, or it did not parse
  std::string error;  // its parse error, reported when the chat renders (as vLLM's)
};

OwnTemplate own_template(const RequestFields& f) {
  OwnTemplate t;
  const char* field = "chat_template";
  if (std::optional<std::string> top = f.string("chat_template"); top && *top != "auto") {
    t.source = std::move(*top);
  } else if (const json* kwargs = f.value("chat_template_kwargs")) {
    auto it = kwargs->find("chat_template");
    if (it != kwargs->end() && !it->is_null()) {
      if (!it->is_string())
        fail(fmt::format("chat_template_kwargs.chat_template must be a string, got {}",
                         type_name(*it)),
             "chat_template_kwargs");
      t.source = it->get<std::string>();
      field = "chat_template_kwargs";
    }
  }
  if (!t.source) return t;
  constexpr size_t kMaxRequestTemplateBytes = size_t{64} << 10;
  if (t.source->size() > kMaxRequestTemplateBytes)
    fail(fmt::format("chat_template is {} bytes; at most {} KiB (a server-wide template can be "
                     "larger: --chat-template)",
                     t.source->size(), kMaxRequestTemplateBytes >> 10),
         field);
  try {
    t.parsed = std::make_shared<const ChatTemplate>(*t.source);
  } catch (const ChatTemplateError& e) {
    t.error = e.what();
  }
  return t;
}

// vLLM's _validate_chat_template (serving chat and /tokenize): a request
// that brings its own template, as chat_template or as
// chat_template_kwargs' "chat_template" (any value but null, "auto"
// included), is refused unless the server trusts them
// (--trust-request-chat-template). Offline chats (LLM.chat) are not checked,
// as in vLLM.
void check_template_trusted(const RequestFields& f, const ServingModel& model) {
  if (model.trust_request_chat_template) return;
  const json* kwargs = f.value("chat_template_kwargs");
  const bool in_kwargs =
      kwargs && kwargs->contains("chat_template") && !kwargs->at("chat_template").is_null();
  if (f.value("chat_template") || in_kwargs)
    fail(
        "Chat template is passed with request, but --trust-request-chat-template is not set. "
        "Refused request with untrusted chat template.");
}

// vLLM's resolve_chat_template_content_format for one chat: `given` (the
// server's --chat-template-content-format, or an offline chat's own) unless
// auto; then what the template the chat renders with (its own template,
// else the server's) does with content. An own template that does not
// parse is "string" here and its error comes from rendering.
ChatContentFormat chat_content_format(const OwnTemplate& own, const ServingModel& model,
                                      ChatContentFormat given) {
  if (given != ChatContentFormat::kAuto) return given;
  if (!own.source) return model.template_content_format;
  return resolve_chat_content_format(ChatContentFormat::kAuto, own.parsed.get());
}

// The chat's prompt text: the request's or the server's template, with
// add_generation_prompt, chat_template_kwargs and documents; cut after the
// final message when continue_final_message.
// ordered: the request with each object's key order as sent (null: f's
// sorted objects), where documents and chat_template_kwargs are read.
std::string render_chat(const RequestFields& f, const ordered_json& messages,
                        const ServingModel& model, const OwnTemplate& own,
                        const ordered_json& tools = nullptr, bool offline = false,
                        const ordered_json* ordered = nullptr) {
  const auto sent = [&](const char* name) -> const ordered_json* {
    if (!ordered) return nullptr;
    auto it = ordered->find(name);
    return it == ordered->end() || it->is_null() ? nullptr : &*it;
  };
  ChatRenderOptions o;
  o.add_generation_prompt = *f.boolean("add_generation_prompt");
  const bool continue_final = *f.boolean("continue_final_message");
  // vLLM's check_generation_prompt; transformers refuses the pair too.
  if (continue_final && o.add_generation_prompt)
    fail("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
         "continue_final_message");
  if (own.source) {
    o.chat_template = *own.source;
    o.parsed_chat_template = own.parsed;
  }
  // vLLM passes documents to the template, then chat_template_kwargs.
  if (const ordered_json* docs = sent("documents"))
    o.variables["documents"] = *docs;
  else if (const json* d = f.value("documents"))
    o.variables["documents"] = ordered_json(*d);
  // Then the tools (vLLM's order: chat_template_kwargs may override them).
  if (!tools.is_null()) o.variables["tools"] = tools;
  if (const json* kwargs = f.value("chat_template_kwargs")) {
    // Template variables: a few in practice; bounded so that taking them
    // into the template costs nothing (2 M keys took 6 s).
    constexpr size_t kMaxKwargs = 1024;
    if (kwargs->size() > kMaxKwargs)
      fail(fmt::format("chat_template_kwargs has {} keys; at most {}", kwargs->size(), kMaxKwargs),
           "chat_template_kwargs");
    const ordered_json in_order =
        sent("chat_template_kwargs") ? *sent("chat_template_kwargs") : ordered_json(*kwargs);
    for (const auto& [key, value] : in_order.items()) {
      // "chat_template" names the template (own_template), as in vLLM,
      // where apply_chat_template takes it as its own argument.
      if (key == "chat_template") continue;
      // The renderer's own variables would shadow these (vLLM: transformers
      // fails on a second `messages`); refused rather than dropped.
      if (key == "messages" || key == "add_generation_prompt" || key == "bos_token" ||
          key == "eos_token" || key == "raise_exception")
        fail(
            fmt::format(
                "chat_template_kwargs cannot set '{}'; it is set by the request (or the tokenizer)",
                key),
            "chat_template_kwargs");
      o.variables[key] = value;
    }
  }
  // What transformers' apply_chat_template checks of the tools and documents
  // it is handed (vLLM's LLM.chat and server hand them over, after
  // chat_template_kwargs' own): each tool a dict (a JSON schema), each
  // document a dict; its messages.
  const bool from_kwargs = f.value("chat_template_kwargs") != nullptr;
  const auto dicts_only = [&](const char* name, const char* message) {
    auto it = o.variables.find(name);
    if (it == o.variables.end() || it->is_null()) return;
    const bool kwarg = from_kwargs && f.value("chat_template_kwargs")->contains(name);
    bool ok = it->is_array();
    if (ok)
      for (const ordered_json& item : *it) ok = ok && item.is_object();
    if (!ok) fail(message, kwarg ? "chat_template_kwargs" : name);
  };
  dicts_only("tools",
             "Tools should either be a JSON schema, or a callable function with type hints and a "
             "docstring suitable for auto-conversion to a schema.");
  dicts_only("documents", "Documents should be a list of dicts with 'title' and 'text' keys!");
  if (!model.chat_renderer || (!own.source && !model.has_chat_template))
    fail(offline ? fmt::format("The model `{}` has no chat template (tokenizer_config.json has no "
                               "chat_template); pass chat_template (LLM(chat_template=...) or "
                               "LLM.chat(..., chat_template=...); `pagoda generate "
                               "--chat-template FILE`) to chat with it",
                               model.served_model_name)
                 : fmt::format("The model `{}` has no chat template (tokenizer_config.json has no "
                               "chat_template); start the server with --chat-template FILE, or "
                               "with --trust-request-chat-template and send chat_template, to use "
                               "/v1/chat/completions",
                               model.served_model_name),
         "messages");
  if (own.source && !own.parsed)
    fail(fmt::format("Chat template error: {}", own.error), "chat_template");
  std::string prompt;
  try {
    prompt = model.chat_renderer(messages, o);
  } catch (const ChatTemplateError& e) {
    fail(fmt::format("Chat template error: {}", e.what()),
         own.source ? "chat_template" : "messages");
  }
  if (continue_final)
    prompt = cut_after_final_message(prompt, final_message_text(messages.back()["content"]));
  return prompt;
}

}  // namespace

bool chat_needs_key_order(const json& obj) {
  for (const char* name : {"tools", "documents", "chat_template_kwargs"})
    if (const json* v = get(obj, name); v && !v->empty()) return true;
  const json* msgs = get(obj, "messages");
  if (!msgs || !msgs->is_array()) return false;
  for (const json& m : *msgs)
    if (m.is_object() && (m.contains("tool_calls") || m.contains("tools"))) return true;
  return false;
}

namespace {

ParseResult parse_chat(json obj, const ordered_json* ordered, const ServingModel& model,
                       bool check_context);

}  // namespace

ParseResult parse_chat_request(std::string_view body, const ServingModel& model,
                               bool check_context) {
  try {
    json obj = parse_request_body(body);
    if (!chat_needs_key_order(obj))
      return parse_chat(std::move(obj), nullptr, model, check_context);
    // The same text again, keeping each object's key order (it parsed
    // strictly above, so it parses here).
    const ordered_json ordered = ordered_json::parse(body);
    return parse_chat(std::move(obj), &ordered, model, check_context);
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

ParseResult parse_chat_object(json obj, const ServingModel& model, bool check_context,
                              const ordered_json* ordered) {
  return parse_chat(std::move(obj), ordered, model, check_context);
}

namespace {

ParseResult parse_chat(json obj, const ordered_json* ordered, const ServingModel& model,
                       bool check_context) {
  try {
    ParsedRequest req;
    req.kind = ApiKind::kChat;
    RequestFields f = checked_fields(obj, request_model::chat_model(), req);
    req.model = check_model(obj, model);
    check_template_trusted(f, model);
    parse_sampling(f, model, req.sampling);
    const bool logprobs = *f.boolean("logprobs");
    const int64_t top = *f.integer("top_logprobs");
    if (top > 0 && !logprobs)
      fail("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    if (logprobs) req.sampling.logprobs = static_cast<int>(top);
    const char* max_param = f.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    const std::optional<int64_t> requested = f.integer(max_param);
    check_seqs_per_request(1, req.sampling.n, model);
    auto ordered_field = [&](const char* name) -> std::optional<ordered_json> {
      if (ordered) {
        auto it = ordered->find(name);
        if (it == ordered->end() || it->is_null()) return std::nullopt;
        return *it;
      }
      const json* v = get(obj, name);
      return v ? std::optional<ordered_json>(ordered_json(*v)) : std::nullopt;
    };
    const std::optional<ordered_json> sent_tools = ordered_field("tools");
    const ChatTools tools = parse_chat_tools(f.value("tools"), f.value("tool_choice"),
                                             sent_tools ? &*sent_tools : nullptr, model);
    req.tool_parser = tools.parser;
    apply_tool_choice_guide(tools, f, model, req.sampling, req.forced_tool);
    const OwnTemplate own = own_template(f);
    const std::optional<ordered_json> sent_messages = ordered_field("messages");
    const ordered_json messages =
        chat_messages(sent_messages ? &*sent_messages : nullptr, model.max_chat_messages,
                      chat_content_format(own, model, model.chat_template_content_format));
    std::string prompt = render_chat(f, messages, model, own, tools.tools, false, ordered);
    if (!*f.boolean("add_generation_prompt") && !messages.empty() &&
        messages.back().contains("role") && messages.back()["role"].is_string())
      req.response_role = messages.back()["role"].get<std::string>();
    if (*f.boolean("echo") && !messages.empty() &&
        messages.back().value("role", ordered_json()) == ordered_json(req.response_role)) {
      // vLLM's echo: a list of parts as their texts joined with "\n".
      req.chat_echo = content_text(messages.back().value("content", ordered_json()));
    }
    const auto k = truncation(f, model);
    PromptInput p;
    p.token_ids = encode_prompt_checked(prompt, *f.boolean("add_special_tokens"), model,
                                        k               ? PromptLength::kTruncated
                                        : check_context ? PromptLength::kEnforced
                                                        : PromptLength::kBounded,
                                        "messages", k ? static_cast<size_t>(*k) : 0);
    if (p.token_ids.empty()) fail("The rendered chat prompt is empty", "messages");
    if (k) truncate_ids(p.token_ids, *k, *f.boolean("add_special_tokens"), model);
    p.max_tokens = check_context
                       ? resolve_max_tokens(requested, static_cast<int64_t>(p.token_ids.size()),
                                            model.max_model_len, "messages", max_param)
                       : 1;
    // Unset: generation_config.json's max_new_tokens, within the room left
    // (vLLM's get_max_tokens: the smallest of the room, the request's
    // max_tokens or else the default one).
    if (check_context && !requested && model.generation_config.max_new_tokens)
      p.max_tokens = std::min(p.max_tokens, *model.generation_config.max_new_tokens);
    p.text = std::move(prompt);
    req.prompts.push_back(std::move(p));
    finish_openai(f, model, req, "chatcmpl-");
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

}  // namespace

std::optional<OpenAIError> check_sampling_fields(const json& fields, int64_t max_logprobs,
                                                 const GenerationConfig& generation_config) {
  try {
    if (!fields.is_object()) fail("SamplingParams fields must be a JSON object", "");
    request_model::RequestFields f(fields, request_model::offline_model());
    if (!f.unknown().empty())
      fail(fmt::format("'{}' is not a SamplingParams field", f.unknown().front()),
           f.unknown().front());
    for (const char* prompt : {"prompt", "prompt_token_ids", "messages"})
      if (fields.contains(prompt))
        fail(fmt::format("'{}' is not a SamplingParams field", prompt), prompt);
    // What parse_sampling, parse_offline_object and finish_sampling check
    // that needs no model, by the same functions.
    const SamplingParams sp = openai_fields::parse_sampling_without_model(f);
    checked_truncation(f);
    // max_tokens as the request pipeline resolves it (parse_offline_object):
    // unset, the model's default; None (null) unbounded.
    if (const auto mt = fields.find("max_tokens"); mt == fields.end())
      check_min_tokens(*f.integer("min_tokens"), default_offline_max_tokens(f, generation_config));
    else if (!mt->is_null())
      check_min_tokens(*f.integer("min_tokens"), *f.integer("max_tokens"));
    check_sampling_cross_fields(f, sp, /*echo=*/false, "logprobs", max_logprobs);
    const json* stop = f.value("stop");
    if (!*f.boolean("detokenize") && stop && !stop->empty())
      fail(
          "stop strings are only supported when detokenize is True. Set detokenize=True to use "
          "stop.",
          "stop");
    return std::nullopt;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

namespace {

// Python's truth value of a JSON value (bool(x)): null, false, 0, "", [] and
// {} are false.
bool python_truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

}  // namespace

ParseResult parse_offline_object(ordered_json sent, const ServingModel& model) {
  try {
    ParsedRequest req;
    req.kind = ApiKind::kCompletion;
    // A prompt's cache_salt as vLLM's renderer takes it (BaseRenderer's
    // _process_tokens: `if cache_salt := prompt.get("cache_salt")`): a false
    // value ("", null, ...) is no salt; any other must be a string (the
    // request model's type check: vLLM's TextPrompt / TokensPrompt declare
    // one).
    if (const auto salt = sent.find("cache_salt");
        salt != sent.end() && !python_truthy(json(*salt)))
      sent.erase(salt);
    openai_fields::keep_schema_key_order(sent);
    const json obj(sent);  // the fields, read as every endpoint reads them
    RequestFields f(obj, request_model::offline_model());
    // Strict, as vLLM's SamplingParams(**kwargs): a misspelled field is an
    // error, not a warning.
    if (!f.unknown().empty())
      fail(fmt::format("'{}' is not a SamplingParams field (nor a prompt: 'prompt', "
                       "'prompt_token_ids' or 'messages')",
                       f.unknown().front()),
           f.unknown().front());
    req.model = model.served_model_name;
    req.tokenizer = model.tokenizer;
    parse_sampling(f, model, req.sampling);
    if (auto lp = f.integer("logprobs")) req.sampling.logprobs = static_cast<int>(*lp);
    req.detokenize = *f.boolean("detokenize");
    // vLLM's SamplingParams._verify_args.
    if (!req.detokenize && !req.sampling.stop.empty())
      fail(
          "stop strings are only supported when detokenize is True. Set detokenize=True to use "
          "stop.",
          "stop");
    const int forms =
        int{f.has("prompt")} + int{f.has("prompt_token_ids")} + int{f.has("messages")};
    if (forms != 1)
      fail(forms == 0 ? "A request needs a prompt: 'prompt', 'prompt_token_ids' or 'messages'"
                      : "A request takes one of 'prompt', 'prompt_token_ids' and 'messages', "
                        "not several",
           "prompt");
    if (!f.has("messages"))
      for (const char* chat_only :
           {"add_generation_prompt", "continue_final_message", "chat_template",
            "chat_template_kwargs", "documents", "chat_template_content_format", "tools"})
        if (f.has(chat_only))
          fail(fmt::format("'{}' applies to chat requests ('messages') only", chat_only),
               chat_only);
    check_seqs_per_request(1, req.sampling.n, model);
    const auto k = truncation(f, model);
    const PromptLength length = k ? PromptLength::kTruncated : PromptLength::kEnforced;
    const size_t keep = k ? static_cast<size_t>(*k) : 0;
    const char* what = "prompt";
    PromptInput p;
    bool added_specials = false;  // text tokenized with BOS/EOS added
    if (auto text = f.string("prompt")) {
      p = prompt_from_text(*text, obj, model, length, keep);
      added_specials = true;
    } else if (const json* ids = f.value("prompt_token_ids")) {
      what = "prompt_token_ids";
      std::vector<int32_t> v = token_ids_from_json(*ids, model, what);
      if (v.empty()) fail("'prompt_token_ids' must not be empty", what);
      p.token_ids = std::move(v);
    } else {
      // vLLM's LLM.chat: the template's text, tokenized without special
      // tokens (the template writes BOS itself).
      what = "messages";
      const ordered_json& sent_messages = sent["messages"];
      ChatContentFormat given = model.chat_template_content_format;
      if (const std::optional<std::string> name = f.string("chat_template_content_format")) {
        const std::optional<ChatContentFormat> parsed = parse_chat_content_format(*name);
        if (!parsed)
          fail(fmt::format("chat_template_content_format must be 'auto', 'string' or 'openai', "
                           "got '{}'",
                           *name),
               "chat_template_content_format");
        given = *parsed;
      }
      const OwnTemplate own = own_template(f);
      const ordered_json messages = chat_messages(&sent_messages, model.max_chat_messages,
                                                  chat_content_format(own, model, given));
      // LLM.chat's tools, as given (render_chat checks each is a dict, as
      // transformers does).
      const ordered_json* tools = sent.contains("tools") ? &sent["tools"] : nullptr;
      p.text = render_chat(f, messages, model, own, tools ? *tools : ordered_json(nullptr),
                           /*offline=*/true, &sent);
      p.token_ids =
          encode_prompt_checked(p.text, /*add_special_tokens=*/false, model, length, what, keep);
      if (p.token_ids.empty()) fail("The rendered chat prompt is empty", what);
    }
    if (k) truncate_ids(p.token_ids, *k, added_specials, model);
    p.token_ids_only = f.has("prompt_token_ids");
    // Unset max_tokens: vLLM SamplingParams' 16; null: vLLM's None, until
    // the context is full. Either way, and for a requested count, capped by
    // the room left in the context: vLLM's LLM refuses only a prompt that
    // fills it, and generation stops at max_model_len ("length").
    const bool requested = f.has("max_tokens");
    const auto mt = obj.find("max_tokens");
    const bool unlimited = mt != obj.end() && mt->is_null();
    // vLLM's SamplingParams._verify_args: min_tokens <= max_tokens as given
    // (unset: the default count; None: no bound), not the count the context
    // leaves: generation stops at max_model_len first ("length").
    if (requested)
      check_min_tokens(req.sampling.min_tokens, *f.integer("max_tokens"));
    else if (!unlimited)
      check_min_tokens(req.sampling.min_tokens,
                       default_offline_max_tokens(f, model.generation_config));
    p.max_tokens = resolve_max_tokens(requested ? f.integer("max_tokens") : std::nullopt,
                                      static_cast<int64_t>(p.token_ids.size()), model.max_model_len,
                                      what, "max_tokens", ContextOverflow::kCap);
    // Unset: generation_config.json's max_new_tokens (vLLM's get_default_sampling_params,
    // for LLM.generate without SamplingParams; one given sets max_tokens, make_requests).
    if (!requested && !unlimited)
      p.max_tokens = std::min(p.max_tokens, default_offline_max_tokens(f, model.generation_config));
    req.prompts.push_back(std::move(p));
    apply_cache_salt(f, req);
    finish_checks(req, MinTokensBound::kCheckedBefore);
    // Past the room the context leaves, min_tokens changes nothing (the
    // length limit ends the output first, as vLLM's check_stop); the engine
    // holds min_tokens <= max_tokens.
    req.sampling.min_tokens = std::min(req.sampling.min_tokens, req.prompts.front().max_tokens);
    finish_sampling(f, model, req);
    return req;
  } catch (const RequestFieldError& e) {
    return e.error;
  }
}

}  // namespace pagoda
