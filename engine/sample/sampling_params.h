// SamplingParams: per-request decoding settings, with vLLM's names, meanings
// and defaults (vllm/sampling_params.py). The server fills it from the
// OpenAI request, generation_config.json supplying defaults for fields the
// request leaves out.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagoda {

struct SamplingParams {
  int n = 1;                    // samples per prompt (issue 5; 1 for now)
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
  std::optional<int> logprobs;  // number of top logprobs per token (issue 5)

  bool greedy() const { return temperature < 1e-5f; }
};

}  // namespace pagoda
