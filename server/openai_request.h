// The OpenAI request side of the protocol layer: JSON body → ParsedRequest
// (prompt token ids + SamplingParams + response options) or an OpenAIError.
// Pure functions of (body, ServingModel); no I/O, no engine state.
//
// Reference: the OpenAI API reference (Completions, Chat Completions) and
// vLLM's CompletionRequest / ChatCompletionRequest
// (vllm/entrypoints/openai/protocol.py): same field names and defaults, the
// same validation messages where vLLM has one. Each endpoint's fields are
// declared once in server/request_model.cpp (type, default, range, status)
// and checked there before the conversion here reads them: fields known but
// not supported yet (guided_grammar, functions, suffix, ...) answer 400 naming them when set to
// anything but their default; keys no model declares are logged (spdlog warn, vLLM's words) and
// listed in ParsedRequest::ignored_fields. Completions' echo with logprobs asks for the prompt's
// logprobs (vLLM: prompt_logprobs = logprobs), written first in the logprobs object.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/beam_search.h"
#include "engine/sample/sampling_params.h"
#include "server/forced_tool_calls.h"
#include "server/openai_error.h"
#include "server/serving_model.h"
#include "server/tool_call_parser.h"

namespace pagoda {

// kGenerate: vLLM's simple api_server POST /generate ({"text": [...]}).
enum class ApiKind { kCompletion, kChat, kGenerate };

// One prompt of a request. A completions request may carry several (a list
// of strings or of token-id lists); each gets n choices, choice index
// prompt_index * n + sample_index (vLLM's order).
struct PromptInput {
  std::vector<int32_t> token_ids;
  std::string text;        // as sent, or the ids decoded (echo, /generate)
  int64_t max_tokens = 0;  // resolved for this prompt's length
  // Offline token-id prompt (vLLM's TokensPrompt): it has no text, and
  // RequestOutput.prompt is None, as vLLM v1's.
  bool token_ids_only = false;
};

struct ParsedRequest {
  ApiKind kind = ApiKind::kCompletion;
  // "cmpl-" / "chatcmpl-" + the request's request_id (vLLM), else + 32
  // random hex digits; /generate: "gen-<32 hex>".
  std::string request_id;
  int64_t created = 0;                    // Unix time, seconds
  std::string model;                      // the served model name (echoed back)
  std::vector<int32_t> prompt_token_ids;  // prompts[0].token_ids
  std::vector<PromptInput> prompts;       // >= 1; chat: exactly one
  SamplingParams sampling;                // max_tokens always set (prompts[0]'s)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // stream_options.continuous_usage_stats (vLLM extension), only honoured
  // with include_usage: every chunk carries its choice's usage so far.
  bool continuous_usage_stats = false;
  // --enable-prompt-tokens-details: usage carries "prompt_tokens_details":
  // {"cached_tokens": prompt tokens read from the prefix cache}.
  bool prompt_tokens_details = false;
  bool return_token_ids = false;  // vLLM extension: ids in the choices
  // vLLM's cache_salt: only requests with the same salt share prefix-cache
  // blocks (GenerateRequest::cache_salt); "" when absent (a present "" is a
  // 400).
  std::string cache_salt;
  bool echo = false;              // completions: prompt text first
  // Completions' echo with max_tokens 0 (OpenAI's legacy API, vLLM): each
  // choice is its prompt alone (text, and its logprobs with logprobs set);
  // the engine still runs one token (max_tokens 1), as vLLM's does, and
  // usage counts it.
  bool echo_without_generation = false;
  // Chat: the answer's role (vLLM's get_chat_request_role: "assistant"
  // with add_generation_prompt, else the last message's role), and with
  // echo the last message's content when its role is that one (vLLM
  // prepends it to each choice's content; streamed, to its first delta).
  std::string response_role = "assistant";
  std::string chat_echo;
  // Chat with tools and tool_choice "auto": the parser that finds tool calls
  // in each choice's text (server/tool_call_parser.h; ChoiceAssembler runs
  // it). kNone: the text is content.
  ToolParserKind tool_parser = ToolParserKind::kNone;
  // Chat with tool_choice "required" or a named function: sampling.guide
  // constrains the output to the tools' JSON and ChoiceAssembler reads the
  // calls from it (server/forced_tool_calls.h). kNone otherwise.
  ForcedToolChoice forced_tool;
  // Logprobs wanted (sampling.logprobs set); chat writes logprobs.content,
  // completions the {tokens, token_logprobs, top_logprobs, text_offset}
  // object. The tokenizer turns ids into the token strings.
  std::shared_ptr<const Tokenizer> tokenizer;
  // Keys of the body that the endpoint's request model does not declare
  // (e.g. a misspelled "max_token"), in the body's order; logged once.
  std::vector<std::string> ignored_fields;

  // Offline SamplingParams.detokenize (vLLM): false leaves the outputs'
  // text empty.
  bool detokenize = true;
  // use_beam_search: the search's parameters (max_tokens is each prompt's
  // PromptInput::max_tokens); sampling.n of the beams are each prompt's
  // choices. Unset: sampling as usual.
  std::optional<BeamSearchParams> beam_search;
  // Choices in the response: prompts.size() * n.
  int num_choices() const { return static_cast<int>(prompts.size()) * sampling.n; }
};

using ParseResult = std::variant<ParsedRequest, OpenAIError>;

// /v1/completions' max_tokens when the request leaves it out (vLLM's
// CompletionRequest.max_tokens = 16, OpenAI's legacy completions default).
inline constexpr int64_t kCompletionDefaultMaxTokens = 16;

// POST /v1/completions. prompt: a string (tokenized with the tokenizer's
// special tokens, i.e. BOS prepended when add_bos_token), a list of token
// ids (used as given), a list of strings or a list of token-id lists (one
// PromptInput each). truncate_prompt_tokens k keeps each prompt's last k
// tokens (-1: max_model_len; text keeps the BOS it was given, as HF's
// left truncation). max_tokens unset: kCompletionDefaultMaxTokens, capped
// at max_model_len - prompt length (vLLM's CompletionRequest default and
// get_max_tokens).
ParseResult parse_completion_request(std::string_view body, const ServingModel& model);
// The same for a body already parsed (a JSON object; /v1/ws messages): the
// value is used in place, not dumped and parsed again.
ParseResult parse_completion_object(nlohmann::json obj, const ServingModel& model);

// POST /v1/chat/completions. messages: [{role, content}] with content a
// string, null or missing (rendered as "", as vLLM does), or a list of
// {"type": "text", "text"} parts (joined with "\n", as vLLM does); rendered
// with model.chat_renderer: the server's template or the request's
// chat_template, chat_template_kwargs and documents as template variables,
// add_generation_prompt (default true), continue_final_message (the prompt
// ends inside the final message; with add_generation_prompt true: 400).
// Tokenized WITHOUT adding special tokens (the template writes BOS itself;
// transformers' behaviour), unless the request sets add_special_tokens
// true. Special-token text in prompts ("<s>") becomes its id
// (encode_prompt); truncate_prompt_tokens keeps the last k tokens.
// check_context false (/tokenize, which vLLM does not validate against
// max_model_len): the prompt may have max_model_len tokens or more;
// max_tokens is then 1 and not checked (check_prompt_length_bound still
// refuses text that must exceed max_model_len, bounding the work).
ParseResult parse_chat_request(std::string_view body, const ServingModel& model,
                               bool check_context = true);
// The same for a body already parsed (a JSON object; /v1/ws messages).
// ordered: the same body with each object's key order as sent (for the
// tools and messages the template prints); null: obj's (sorted) order.
ParseResult parse_chat_object(nlohmann::json obj, const ServingModel& model,
                              bool check_context = true,
                              const nlohmann::ordered_json* ordered = nullptr);
// Whether a chat body's rendering depends on the key order of objects in it
// (tools' schemas, tool-call arguments, a developer message's tools,
// documents, chat_template_kwargs), which nlohmann::json (sorted) loses:
// then read the text again as ordered_json for parse_chat_object.
bool chat_needs_key_order(const nlohmann::json& obj);

// Offline generation (server/llm.h's LLM, `pagoda generate`): obj is one
// request of request_model::offline_model(): exactly one of "prompt" (text,
// tokenized with special tokens, i.e. BOS when add_bos_token),
// "prompt_token_ids" (used as given) or "messages" (LLM.chat: rendered with
// the model's or the request's chat_template and add_generation_prompt /
// continue_final_message / chat_template_kwargs / documents, tokenized
// without special tokens), plus vLLM's SamplingParams keywords, validated as
// the HTTP endpoints validate them (the same field tables and conversion).
// max_tokens unset: 16 (vLLM's SamplingParams); null: vLLM's None, the room
// left in the context; any of them capped at max_model_len - prompt length
// (ContextOverflow::kCap: vLLM's LLM refuses only a prompt of max_model_len
// tokens or more). A key the model does not declare is a 400 naming it. The
// ParsedRequest has kind kCompletion, no echo and no request_id (the caller
// names it); prompts[0].text: the prompt text (token ids: none,
// token_ids_only; chat: the rendered template). A chat's "tools" (LLM.chat's
// tools=) reach the template as given, as vLLM passes them. The messages,
// tools, documents and chat_template_kwargs reach the template with each
// object's keys in obj's order (Python dicts' order; guided schemas keep
// theirs too).
ParseResult parse_offline_object(nlohmann::ordered_json obj, const ServingModel& model);

// vLLM's SamplingParams.__post_init__ checks, without a model: `fields` (a
// JSON object of SamplingParams keywords) against request_model::
// offline_model()'s types and ranges, unknown names refused, prompt keys
// refused, and the checks across fields (server/sampling_checks.h) with an
// unset temperature, top_p, top_k or repetition_penalty left to the model
// (parse_sampling_without_model), logprobs, prompt_logprobs and the beam
// width bounded by max_logprobs (the engine's, when known; else the most any
// engine takes). The same tables and functions parse_offline_object uses;
// what needs the model (token ids in the vocabulary, the context, the
// model's eos ids for the beam width) waits for generate(). An unset
// max_tokens is the one parse_offline_object gives such a request (before
// the context caps it): generation_config's max_new_tokens, when the
// model's generation_config.json is passed, else SamplingParams' 16.
std::optional<OpenAIError> check_sampling_fields(
    const nlohmann::json& fields, int64_t max_logprobs = kMaxLogprobs,
    const GenerationConfig& generation_config = GenerationConfig{});

// vLLM's api_server POST /generate: {"prompt": string, "stream", sampling
// fields}; max_tokens defaults to 16 (vLLM SamplingParams' default).
ParseResult parse_generate_request(std::string_view body, const ServingModel& model);

// The parts every JSON endpoint shares (completions, chat, /generate,
// /tokenize, /detokenize). Both throw openai_fields::RequestFieldError (a 400
// OpenAIError) on bad input.
//
// The request body as a JSON object: invalid JSON, nesting deeper than 64
// levels, or a non-object top level are errors.
nlohmann::json parse_request_body(std::string_view body);
// obj["prompt"] as OpenAI / vLLM accept it: a string (tokenized with
// add_special_tokens, default true), a list of token ids (each in
// [0, vocab_size)), a list of strings or a list of token-id lists → one
// PromptInput each (max_tokens left 0). An empty prompt is an error.
// How a text prompt's length is held to max_model_len while tokenizing.
enum class PromptLength {
  kTruncated,  // truncate_prompt_tokens k: any length; only what the last k ids need is
               // tokenized (encode_prompt_tail; the caller cuts to k, truncate_ids)
  kBounded,    // /tokenize: check_prompt_length_bound only, then counted in full
  kEnforced,   // generation: check_prompt_length_bound, then tokenization stops once
               // past max_model_len tokens (400 "at least N input tokens")
};
// `keep`: kTruncated's k.
std::vector<PromptInput> completion_prompts(const nlohmann::json& obj, const ServingModel& model,
                                            PromptLength length = PromptLength::kEnforced,
                                            size_t keep = 0);
// encode_prompt with PromptLength's checks (`what`: the param named; `keep`:
// kTruncated's k).
std::vector<int32_t> encode_prompt_checked(const std::string& text, bool add_special_tokens,
                                           const ServingModel& model, PromptLength length,
                                           const char* what, size_t keep = 0);
// How many prompts obj["prompt"] holds (a list of strings or of id lists:
// its size; anything else 1), without tokenizing any.
size_t count_prompts(const nlohmann::json& obj);
// prompts x n against model.max_seqs_per_request (--max-seqs-per-request):
// a 400 with param "n" when n alone is over it, else "prompt".
void check_seqs_per_request(size_t prompts, int64_t n, const ServingModel& model);
// Refuses text that must tokenize to max_model_len tokens or more
// (Tokenizer::min_token_count, no tokenization: a 30 MB prompt is refused in
// microseconds): 400, vLLM's "This model's maximum context length is N
// tokens. However, your request has at least M input tokens..." with param
// `what` ("prompt" or "messages"). Text under the bound is tokenized and
// checked exactly (resolve_max_tokens) as before; its cost is bounded by
// max_model_len times the longest token's bytes.
void check_prompt_length_bound(std::string_view text, const ServingModel& model, const char* what);

// "<prefix><32 random hex digits>" (vLLM's random_uuid), thread-safe.
std::string make_request_id(std::string_view prefix);

}  // namespace pagoda
