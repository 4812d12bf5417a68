// GenerationConfig: generation_config.json's fields that serving uses —
// eos_token_id (int or list) and sampling defaults applied when a request
// leaves the field out (vLLM's --generation-config auto; its
// ModelConfig.get_diff_sampling_param reads repetition_penalty, temperature,
// top_k, top_p, min_p and max_new_tokens, the last as the default
// max_tokens).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagoda {

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> repetition_penalty;
  std::optional<float> min_p;
  // The max_tokens of a request that sets none (chat, offline without
  // SamplingParams), capped by the room in the context.
  std::optional<int64_t> max_new_tokens;
  std::optional<int64_t> max_length;
  // Reads <dir>/generation_config.json if present (empty config otherwise).
  // Throws std::runtime_error naming the file when it is malformed.
  static GenerationConfig from_dir(const std::string& model_dir);
};

}  // namespace pagoda
