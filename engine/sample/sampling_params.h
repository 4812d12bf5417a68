// SamplingParams: per-request decoding settings, with vLLM's names, meanings
// and defaults (vllm/sampling_params.py). The server fills it from the
// OpenAI request, generation_config.json supplying defaults for fields the
// request leaves out.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pagoda {

namespace guided {
class Guide;
struct GuideSpec;
}  // namespace guided

struct SamplingParams {
  int n = 1;                    // choices returned per prompt (>= 1)
  // Candidates generated per prompt (>= n); the n with the highest cumulative
  // logprob are returned (vLLM/OpenAI best_of). Unset = n. All candidates
  // share the prompt's KV blocks (reference counts, copy-on-write).
  std::optional<int> best_of;
  float temperature = 1.0f;     // 0 = greedy
  float top_p = 1.0f;           // (0, 1]; 1 = off
  int top_k = 0;                // 0 or -1 = off
  float min_p = 0.0f;           // [0, 1]; 0 = off
  std::optional<uint64_t> seed; // per-request RNG seed; same seed → same output
  std::optional<int64_t> max_tokens;  // unset: max_model_len - prompt_len
  int64_t min_tokens = 0;       // EOS / stop ids suppressed before this many
  std::vector<std::string> stop;          // stop strings (matched on text)
  std::vector<int32_t> stop_token_ids;    // extra stop ids (besides EOS)
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  // Logprobs per generated token: unset = none; k >= 0 = the sampled token's
  // logprob plus the k most likely tokens' (OpenAI completions `logprobs`,
  // chat `top_logprobs`). Raw model log-softmax, before temperature,
  // penalties, bias and top-k/p (vLLM's default "raw_logprobs").
  std::optional<int> logprobs;
  // OpenAI logit_bias: (token id, bias in [-100, 100]) added to the logits
  // before sampling.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM allowed_token_ids: when non-empty, every other id gets -inf before
  // the steps below (ids in [0, vocab)).
  std::vector<int32_t> allowed_token_ids;
  // vLLM bad_words, as sent, and their token ids (filled by the server:
  // each word encoded without special tokens, with and without a leading
  // space, as vLLM's SamplingParams.update_from_tokenizer). A one-token word
  // is banned at every step; a longer one bans its last token when the
  // output so far ends with the others.
  std::vector<std::string> bad_words;
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  // vLLM prompt_logprobs: unset = none; k >= 0 = each prompt token's raw
  // logprob (the first token has none) plus the k most likely tokens' at
  // that position (k <= kMaxLogprobs).
  std::optional<int> prompt_logprobs;

  // Guided decoding (vLLM structured outputs: guided_regex, guided_choice,
  // guided_json, response_format json_object / json_schema): the request's
  // constraint as sent, and its compiled guide (engine/guided/guide.h),
  // filled by the server. Null: unconstrained. Each sequence keeps its
  // automaton state (Sequence::guide_state); the sampler allows only the
  // state's tokens (EOS when it accepts) and the stop checker finishes the
  // sequence ("stop") when no text token can follow.
  std::shared_ptr<const guided::GuideSpec> guided_spec;
  std::shared_ptr<const guided::Guide> guide;

  bool greedy() const { return temperature < 1e-5f; }
};

}  // namespace pagoda
