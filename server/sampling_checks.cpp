#include "server/sampling_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/openai_fields.h"

namespace pagoda {

using nlohmann::json;
using openai_fields::fail;

void check_best_of(int64_t n, std::optional<int64_t> best_of) {
  if (best_of && *best_of < n)
    fail(fmt::format("best_of must be greater than or equal to n, got n={} and best_of={}.", n,
                     *best_of),
         "best_of");
}

void check_beam_width(int beam_width, size_t num_eos_ids, const char* param, int64_t max_logprobs) {
  const int k = beam_candidates(beam_width, num_eos_ids);
  if (k <= max_logprobs) return;
  const int per_beam = beam_candidates(1, num_eos_ids);
  const std::string why =
      per_beam == 2 ? std::string()
                    : fmt::format(" ({} = 1 + the {} eos / stop token ids, as HF transformers)",
                                  per_beam, num_eos_ids);
  const int64_t most = max_logprobs / per_beam;
  fail(fmt::format("{}={} is too many beams: beam search asks the engine for {} x {} = {} "
                   "next-token candidates per step{}, as top logprobs, and they must be <= "
                   "max_logprobs ({}; --max-logprobs, LLM(max_logprobs=...)): {}",
                   param, beam_width, per_beam, beam_width, k, why, max_logprobs,
                   most > 0 ? fmt::format("at most {} beams", most)
                            : fmt::format("beam search needs max_logprobs >= {}", per_beam)),
       param);
}

namespace {

// `field` (logprobs, top_logprobs or prompt_logprobs; k as sent) within the
// engine's max_logprobs (--max-logprobs).
void check_logprobs_limit(const char* field, std::optional<int> k, int64_t max_logprobs) {
  if (k && *k > max_logprobs)
    fail(fmt::format("{} must be between 0 and {}, got {}: the engine's max_logprobs is {} "
                     "(--max-logprobs; LLM(max_logprobs=...))",
                     field, max_logprobs, *k, max_logprobs),
         field);
}

// vLLM's SamplingParams._verify_greedy_sampling: greedy sampling makes
// every candidate the same sequence, so best_of (v0, where it is a field)
// and n (v1: "n must be 1 when using greedy sampling, got 2."; v0 said it
// of best_of, which defaulted to n) must be 1.
void check_greedy_sampling(bool greedy, int64_t n, std::optional<int64_t> best_of) {
  if (!greedy) return;
  if (best_of && *best_of > 1)
    fail(fmt::format("best_of must be 1 when using greedy sampling, got {}.", *best_of), "best_of");
  if (n > 1) fail(fmt::format("n must be 1 when using greedy sampling, got {}.", n), "n");
}

EarlyStopping parse_early_stopping(const request_model::RequestFields& f) {
  const json* es = f.value("early_stopping");
  if (!es || es->is_null()) return EarlyStopping::kFalse;
  if (es->is_boolean()) return es->get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
  if (es->get_ref<const std::string&>() == "never") return EarlyStopping::kNever;
  fail("early_stopping must be true, false or \"never\"", "early_stopping");
}

}  // namespace

std::optional<BeamSearchParams> check_sampling_cross_fields(const request_model::RequestFields& f,
                                                            const SamplingParams& sp, bool echo,
                                                            const char* logprobs_param,
                                                            int64_t max_logprobs) {
  check_logprobs_limit(logprobs_param, sp.logprobs, max_logprobs);
  check_logprobs_limit("prompt_logprobs", sp.prompt_logprobs, max_logprobs);
  const double length_penalty = *f.number("length_penalty");
  const EarlyStopping early = parse_early_stopping(f);
  const std::optional<int64_t> best_of =
      sp.best_of ? std::optional<int64_t>(*sp.best_of) : std::nullopt;
  if (!*f.boolean("use_beam_search")) {
    if (length_penalty != 1.0)
      fail(
          "length_penalty is not effective and must be the default value of 1.0 when not using "
          "beam search.",
          "length_penalty");
    if (early != EarlyStopping::kFalse)
      fail("early_stopping is not effective and must be False when not using beam search.",
           "early_stopping");
    check_greedy_sampling(sp.greedy(), sp.n, best_of);
    return std::nullopt;
  }
  if (sp.temperature > 1e-5f) fail("temperature must be 0 when using beam search.", "temperature");
  if (sp.top_p < 1.0f - 1e-5f) fail("top_p must be 1 when using beam search.", "top_p");
  if (sp.top_k > 0) fail("top_k must be -1 when using beam search.", "top_k");
  const auto refuse = [](const char* what, const char* param) {
    fail(fmt::format("{} is not supported with use_beam_search yet", what), param);
  };
  if (sp.logprobs) refuse("logprobs", logprobs_param);
  if (sp.prompt_logprobs) refuse("prompt_logprobs", "prompt_logprobs");
  if (!sp.stop.empty()) refuse("stop", "stop");
  if (sp.min_tokens > 0) refuse("min_tokens", "min_tokens");
  if (sp.presence_penalty != 0.0f) refuse("presence_penalty", "presence_penalty");
  if (sp.frequency_penalty != 0.0f) refuse("frequency_penalty", "frequency_penalty");
  if (sp.repetition_penalty != 1.0f) refuse("repetition_penalty", "repetition_penalty");
  if (!sp.logit_bias.empty()) refuse("logit_bias", "logit_bias");
  if (!sp.bad_words.empty()) refuse("bad_words", "bad_words");
  if (!sp.allowed_token_ids.empty()) refuse("allowed_token_ids", "allowed_token_ids");
  if (sp.guide) refuse("guided decoding", "use_beam_search");
  if (echo) refuse("echo", "echo");
  BeamSearchParams p;
  p.beam_width = sp.best_of.value_or(sp.n);
  p.length_penalty = static_cast<float>(length_penalty);
  p.early_stopping = early;
  std::vector<int32_t> stops = sp.stop_token_ids;
  std::sort(stops.begin(), stops.end());
  const auto distinct =
      static_cast<size_t>(std::unique(stops.begin(), stops.end()) - stops.begin());
  check_beam_width(p.beam_width, distinct, sp.best_of ? "best_of" : "n", max_logprobs);
  return p;
}

}  // namespace pagoda
