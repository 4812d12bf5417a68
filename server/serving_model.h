// ServingModel: what the OpenAI protocol layer needs to know about the one
// model this server serves. Built once at startup (server/model_setup.h),
// then read concurrently by every network thread (all members are const or
// thread-safe to call).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/generation_config.h"
#include "engine/sample/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat_content_format.h"
#include "server/prompt_tokenizer.h"
#include "server/tool_call_parser.h"

namespace pagoda {

class ChatTemplate;

// How one request renders its chat (vLLM's ChatCompletionRequest fields).
struct ChatRenderOptions {
  bool add_generation_prompt = true;  // as in transformers' apply_chat_template
  // chat_template: the chat's own Jinja source (the request's
  // chat_template, or chat_template_kwargs' "chat_template"), rendered by
  // the same bounded ChatTemplate as --chat-template; empty: the server's
  // template. parsed_chat_template: that source parsed (the request parser
  // parses it once, for the content format and the rendering); null with a
  // source set: the renderer parses the source itself.
  std::string chat_template;
  std::shared_ptr<const ChatTemplate> parsed_chat_template;
  // chat_template_kwargs, documents and tools: extra template variables
  // (ordered: a dict's keys print in the order sent, as in transformers).
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

// Renders a chat: messages (array of {role, content: string, ...}; objects
// keep the key order sent, e.g. tool-call arguments) → prompt text. Throws
// ChatTemplateError (its what() is reported to the client as a 400), also
// for a request template that does not parse.
using ChatRenderer = std::function<std::string(const nlohmann::ordered_json& messages,
                                               const ChatRenderOptions& options)>;

struct ServingModel {
  std::string served_model_name;  // the `model` clients send and get back
  std::string model_dir;          // shown as /v1/models' root
  int64_t max_model_len = 0;      // prompt + completion tokens, at most
  std::shared_ptr<const Tokenizer> tokenizer;
  // The model's vocab_size (config.json): the ids it can generate. May exceed
  // the tokenizer's (Qwen2: 151,936 rows, 151,665 tokens); ids without a
  // token decode to "" (as HF tokenizers). 0: unknown (the tokenizer's).
  int64_t model_vocab_size = 0;
  GenerationConfig generation_config;  // defaults for fields a request omits
  // Empty: no chat at all (chat → 400). Set: renders the server's template
  // when has_chat_template, and a request's own chat_template always.
  ChatRenderer chat_renderer;
  // tokenizer_config.json's chat_template or --chat-template was given;
  // false: a chat request without its own chat_template is a 400.
  bool has_chat_template = false;
  // vLLM's --chat-template-content-format: how message content reaches the
  // template (server/chat_content_format.h); an offline chat's own
  // chat_template_content_format (LLM.chat) replaces it for that chat.
  ChatContentFormat chat_template_content_format = ChatContentFormat::kAuto;
  // What kAuto resolves to for the server's template (detected once, when
  // the model loads: make_serving_model); a request's own chat_template is
  // detected for that request.
  ChatContentFormat template_content_format = ChatContentFormat::kString;
  // Bounds on one request's preprocessing (400 beyond, naming the flag):
  // prompts x n sequences (--max-seqs-per-request; a completions list of
  // prompts is counted before any is tokenized), and chat messages
  // (--max-chat-messages; counted before the template renders).
  int64_t max_seqs_per_request = kDefaultMaxSeqsPerRequest;
  int64_t max_chat_messages = kDefaultMaxChatMessages;
  // Tool calling (vLLM's --enable-auto-tool-choice, --tool-call-parser):
  // tool_choice "auto" needs both; the parser finds calls in the output.
  bool enable_auto_tool_choice = false;
  ToolParserKind tool_call_parser = ToolParserKind::kNone;
  // vLLM's --trust-request-chat-template: false, a chat or /tokenize
  // request that brings its own template (chat_template, or
  // chat_template_kwargs' "chat_template") is refused with a 400, as vLLM
  // refuses it; offline chats (LLM.chat) are not checked.
  bool trust_request_chat_template = false;
  // vLLM's --enable-prompt-tokens-details: usage carries
  // prompt_tokens_details {cached_tokens} (prefix-cache hits).
  bool enable_prompt_tokens_details = false;
  // vLLM's --max-logprobs: the most top logprobs a request may ask for
  // (logprobs, top_logprobs, prompt_logprobs), and so the bound on a beam
  // search's width (its candidates come as top logprobs).
  int64_t max_logprobs = kMaxLogprobs;
  static constexpr int64_t kDefaultMaxSeqsPerRequest = 1024;
  static constexpr int64_t kDefaultMaxChatMessages = 2048;
};

}  // namespace pagoda
