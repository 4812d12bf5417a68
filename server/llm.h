// Offline inference: vLLM's LLM class (vllm/entrypoints/llm.py) over the
// server's request pipeline. Each prompt becomes a request object (its
// prompt form plus vLLM's SamplingParams keywords) that goes through the same
// parser and validation as the HTTP endpoints (parse_offline_object: the
// request_model field tables and openai_fields' conversion) and the same
// GenerationGroup / Engine as every front end; generate() steps the engine
// on the calling thread until every request has finished, and returns the
// outputs in the order of the prompts, in vLLM's RequestOutput shape
// (vllm/outputs.py). `pagoda generate` and the Python module (python/) are
// built on it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/mask_precompute.h"
#include "server/engine_args.h"
#include "server/openai_request.h"
#include "server/progress_bar.h"
#include "server/serving_model.h"

namespace pagoda {
class EngineAdapter;
}

namespace pagoda::offline {

// vLLM's Logprob (vllm/logprobs.py): a natural-log probability from the
// raw model distribution (before temperature, penalties and top-k/p, as the
// server's logprobs), its 1-based rank in that distribution (the k most
// likely tokens: 1..k; a sampled token outside them: unknown, nullopt; a
// prompt token: always known), and the token decoded alone (leading
// SentencePiece space kept, as vLLM's decoded_token; none with
// SamplingParams.detokenize false, as vLLM's LogprobsProcessor without a
// tokenizer).
struct Logprob {
  float logprob = 0.0f;
  std::optional<int64_t> rank;
  std::optional<std::string> decoded_token;
};
// One position: token id → its Logprob (the sampled or prompt token, and
// the k most likely).
using PositionLogprobs = std::map<int32_t, Logprob>;

// vLLM's CompletionOutput: one of a request's n choices.
struct CompletionOutput {
  int index = 0;  // in [0, n)
  std::string text;
  std::vector<int32_t> token_ids;
  // Sum of the sampled tokens' logprobs; set when logprobs were requested
  // (vLLM v1 leaves it None otherwise).
  std::optional<double> cumulative_logprob;
  // SampleLogprobs: one entry per token id, when SamplingParams.logprobs
  // was set.
  std::optional<std::vector<PositionLogprobs>> logprobs;
  std::optional<std::string> finish_reason;  // "stop", "length", "abort"
  // The stop string or stop token id that ended it; null otherwise (also
  // for EOS), as vLLM's.
  nlohmann::json stop_reason;
};

// vLLM's RequestOutput: one prompt's result.
struct RequestOutput {
  std::string request_id;  // "0", "1", ... counting this LLM's requests (vLLM's Counter)
  // The prompt text: as given, or the rendered chat template; none for
  // token-id prompts (vLLM v1: a TokensPrompt has no text).
  std::optional<std::string> prompt;
  std::vector<int32_t> prompt_token_ids;
  // With SamplingParams.prompt_logprobs: one entry per prompt token, the
  // first nullopt (vLLM's leading None).
  std::optional<std::vector<std::optional<PositionLogprobs>>> prompt_logprobs;
  std::vector<CompletionOutput> outputs;  // index order
  bool finished = false;
  // Prompt tokens whose K/V came from the prefix cache when the request
  // was first scheduled (vLLM v1's num_cached_tokens).
  int64_t num_cached_tokens = 0;
};

// The JSON form `pagoda generate` writes and the Python module reads:
// vLLM's attribute names in vLLM's order; logprob maps as {"<id>":
// {"logprob", "rank", "decoded_token" (null without detokenize)}}, most
// likely first (ordered_json),
// -inf clamped to -9999.0 (JSON has no infinity).
nlohmann::ordered_json to_json(const RequestOutput& out);

// vLLM's SamplingParams as keyword arguments: the fields set, by vLLM's
// names (n, best_of, temperature, top_p, top_k, min_p, seed,
// presence_penalty, frequency_penalty, repetition_penalty, stop,
// stop_token_ids, bad_words, ignore_eos, max_tokens, min_tokens, logprobs,
// prompt_logprobs, skip_special_tokens, spaces_between_special_tokens,
// include_stop_str_in_output, truncate_prompt_tokens, logit_bias,
// allowed_token_ids), e.g. SamplingParams(nlohmann::json{{"temperature",
// 0.8}, {"top_p", 0.95}}). Checked when generate() parses each request (types,
// ranges, unknown names: LLMError). Fields left out take vLLM's
// SamplingParams defaults (temperature 1, top_p 1, top_k off, max_tokens
// 16, ...), not the model's generation_config.json, as vLLM's LLM does with
// an explicit SamplingParams; generate() without one applies the model's
// defaults (vLLM's get_default_sampling_params: generation_config.json's
// temperature, top_p, top_k, min_p, repetition_penalty, and max_new_tokens
// as max_tokens, else 16).
struct SamplingParams {
  SamplingParams() = default;
  explicit SamplingParams(nlohmann::json f) : fields(std::move(f)) {}
  nlohmann::json fields = nlohmann::json::object();
};

// One prompt, as vLLM's PromptType: text (TextPrompt), token ids
// (TokensPrompt) or a chat conversation (LLM.chat). Internally the request
// object parse_offline_object reads; from_json takes one whole (a `pagoda
// generate` JSON line: the prompt form plus any SamplingParams field, which
// overrides the SamplingParams passed to generate()).
class Prompt {
 public:
  Prompt(std::string text);                // NOLINT: implicit, as vLLM takes a str
  Prompt(const char* text);                // NOLINT
  Prompt(std::vector<int32_t> token_ids);  // NOLINT
  // messages: [{"role", "content"}, ...]; options: LLM.chat's
  // chat_template, add_generation_prompt, continue_final_message,
  // chat_template_kwargs, documents, tools (vLLM's keyword names). The
  // template sees each object's keys in the order they have here (as
  // Python dicts keep theirs: ordered_json; a nlohmann::json's are sorted).
  static Prompt chat(nlohmann::ordered_json messages,
                     nlohmann::ordered_json options = nlohmann::ordered_json::object());
  static Prompt from_json(nlohmann::ordered_json request);
  const nlohmann::ordered_json& request() const { return request_; }

 private:
  Prompt() = default;
  nlohmann::ordered_json request_ = nlohmann::ordered_json::object();
};

// A request refused by validation (or failed in the engine).
struct RequestError {
  size_t index = 0;     // the prompt's position
  std::string message;  // the server's message for the same request
  std::string param;    // the field at fault ("" when none)
};

// generate()'s failure: the first invalid request ("prompt 2: 'temperature'
// must be non-negative, got -1."). Thrown before anything runs (vLLM
// validates every request before running the engine), or after the run when
// the engine failed a request.
class LLMError : public std::invalid_argument {
 public:
  explicit LLMError(RequestError e);
  const RequestError& error() const { return error_; }

 private:
  RequestError error_;
};

// generate() / run() stopped by the interrupt check (LLM::set_interrupt_check):
// every request of the run was aborted.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("generation interrupted") {}
};

// One request's result: its output or its error.
struct Result {
  std::optional<RequestOutput> output;
  std::optional<RequestError> error;
};

class LLM {
 public:
  // model_dir: a Hugging Face model directory ("" → the bundled
  // stories260K); args: the engine flags `pagoda serve` takes (its
  // model_dir is replaced). Loads the model and creates the engine (not
  // started: generate() steps it). disable_log_stats is forced on, as
  // vLLM's LLM. Throws std::runtime_error as load_model.
  // generation_config: the model directory's generation_config.json when
  // the caller has read it already (load_model's).
  LLM(std::string model_dir, EngineArgs args = {},
      std::optional<GenerationConfig> generation_config = std::nullopt);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // vLLM's LLM.generate: one RequestOutput per prompt, in order. params:
  // one for every prompt, or none (the model's defaults). use_tqdm: the
  // progress bar on stderr (ProgressBar::Mode::kAuto; false: kOff).
  // Throws LLMError (see above); std::invalid_argument when the lists'
  // lengths differ.
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::optional<SamplingParams>& params = std::nullopt,
                                      bool use_tqdm = true);
  // params[i] for prompts[i] (vLLM: "the list must have the same length as
  // the prompts").
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      bool use_tqdm = true);
  // vLLM's LLM.chat: each conversation rendered with the chat template
  // (the model's, or options' chat_template) and generated; options as
  // Prompt::chat's. A model without a template and no chat_template:
  // LLMError (param "messages").
  std::vector<RequestOutput> chat(const std::vector<nlohmann::json>& conversations,
                                  const std::optional<SamplingParams>& params = std::nullopt,
                                  const nlohmann::json& options = nlohmann::json::object(),
                                  bool use_tqdm = true);

  // generate() on request objects already complete (make_requests' form):
  // every one validated first (LLMError), then run; outputs in order.
  std::vector<RequestOutput> generate_requests(std::vector<nlohmann::ordered_json> requests,
                                               bool use_tqdm = true);

  // Every request object (Prompt::request() form, fields complete) parsed;
  // the valid ones run together; one Result per request, in order (`pagoda
  // generate`: per-line errors).
  std::vector<Result> run(const std::vector<nlohmann::ordered_json>& requests,
                          ProgressBar::Mode bar);

  // Polled between engine steps (at most every 50 ms) while a run goes on;
  // true aborts the run's requests and throws Interrupted (the Python
  // module: Ctrl-C, PyErr_CheckSignals). Empty: never.
  void set_interrupt_check(std::function<bool()> check) { interrupt_ = std::move(check); }

  const ServingModel& serving_model() const { return serving_; }
  const LoadedModel& loaded_model() const { return *model_; }

 private:
  // run() on requests already parsed (parse_offline_object's results).
  std::vector<Result> run_parsed(std::vector<ParseResult> parsed, ProgressBar::Mode bar);
  // After a run with the progress bar: one line with the guided-decoding
  // token masks the run computed, their time and the time per engine step
  // (nothing when it computed none).
  void log_guided_masks(const guided::MaskFillTotals& before, int64_t steps_before) const;

  std::unique_ptr<LoadedModel> model_;
  ServingModel serving_;
  std::unique_ptr<EngineAdapter> handle_;
  std::mutex mu_;  // one generate() at a time
  std::function<bool()> interrupt_;
  uint64_t next_request_ = 0;
};

// vLLM's SamplingParams defaults of the fields generation_config.json would
// otherwise supply (temperature 1, top_p 1, top_k 0, repetition_penalty 1,
// min_p 0: set in `fields` where absent or null; max_tokens 16: where
// absent, null being vLLM's None): a SamplingParams is complete, as vLLM's
// is (make_requests; the Python SamplingParams' construction check).
void apply_sampling_params_defaults(nlohmann::json& fields);
void apply_sampling_params_defaults(nlohmann::ordered_json& fields);

// The request objects generate() runs: each prompt's request, with the
// SamplingParams fields it does not set itself (params[i], or params[0]
// for all when params has one element; none when empty). With params, the
// fields generation_config.json would otherwise supply (temperature, top_p,
// top_k, repetition_penalty, min_p, max_tokens) get vLLM's SamplingParams
// defaults when neither sets them. std::invalid_argument when params has another length.
std::vector<nlohmann::ordered_json> make_requests(const std::vector<Prompt>& prompts,
                                                  const std::vector<SamplingParams>& params);

}  // namespace pagoda::offline
