// vLLM's defaults for max_num_seqs and max_num_batched_tokens, which depend
// on the device and on who runs the engine (vllm/engine/arg_utils.py,
// EngineArgs.get_batch_defaults and
// _set_default_max_num_seqs_and_batched_tokens_args):
//
//   device                                 offline (LLM)   server
//   GPU with >= 70 GiB, name without A100   1024 / 16384    1024 / 8192
//   other GPUs                              256 / 8192      256 / 2048
//   CPU (times the tensor-parallel size)    256 / 4096      128 / 2048
//
// (max_num_seqs / max_num_batched_tokens). An unset max_num_batched_tokens
// is then capped at max_num_seqs · max_model_len, and an unset max_num_seqs
// at max_num_batched_tokens (chunked prefill is always on here, so vLLM's
// raise to max_model_len does not apply). Values the user gave are kept;
// max_num_batched_tokens below max_num_seqs is std::invalid_argument with
// vLLM's message (SchedulerConfig: "max_num_batched_tokens (50) must be
// greater than or equal to max_num_seqs (300).").
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/model/model_executor.h"

namespace pagoda {

// vLLM's UsageContext: LLM_CLASS (`pagoda generate`, the C++ and Python LLM)
// or OPENAI_API_SERVER (`pagoda serve`).
enum class UsageContext { kLlmClass, kOpenAiApiServer };

struct BatchLimits {
  int64_t max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  bool seqs_defaulted = false;    // max_num_seqs came from the table above
  bool tokens_defaulted = false;  // max_num_batched_tokens did
};

// The limits for the given flags (nullopt: not given). world_size: the
// tensor-parallel size (>= 1); max_model_len > 0.
BatchLimits resolve_batch_limits(std::optional<int64_t> max_num_seqs,
                                 std::optional<int64_t> max_num_batched_tokens, UsageContext usage,
                                 const TargetDevice& device, int64_t world_size,
                                 int64_t max_model_len);

}  // namespace pagoda
