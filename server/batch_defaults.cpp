#include "server/batch_defaults.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace pagoda {

BatchLimits resolve_batch_limits(std::optional<int64_t> max_num_seqs,
                                 std::optional<int64_t> max_num_batched_tokens, UsageContext usage,
                                 const TargetDevice& device, int64_t world_size,
                                 int64_t max_model_len) {
  const bool llm = usage == UsageContext::kLlmClass;
  int64_t seqs, tokens;
  if (!device.cuda) {
    seqs = (llm ? 256 : 128) * world_size;
    tokens = (llm ? 4096 : 2048) * world_size;
  } else {
    std::string name = device.name;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    constexpr uint64_t kGiB = uint64_t{1} << 30;
    const bool large =
        device.total_memory_bytes >= 70 * kGiB && name.find("a100") == std::string::npos;
    seqs = large ? 1024 : 256;
    tokens = large ? (llm ? 16384 : 8192) : (llm ? 8192 : 2048);
  }
  BatchLimits r;
  r.seqs_defaulted = !max_num_seqs;
  r.tokens_defaulted = !max_num_batched_tokens;
  r.max_num_seqs = max_num_seqs.value_or(seqs);
  // min(tokens, seqs · max_model_len) without overflowing the product.
  const int64_t len = std::max<int64_t>(max_model_len, 1);
  r.max_num_batched_tokens = max_num_batched_tokens.value_or(
      r.max_num_seqs > tokens / len ? tokens : std::min(tokens, r.max_num_seqs * len));
  if (!max_num_seqs) r.max_num_seqs = std::min(r.max_num_seqs, r.max_num_batched_tokens);
  if (r.max_num_batched_tokens < r.max_num_seqs)  // vLLM's SchedulerConfig check, its words
    throw std::invalid_argument(fmt::format(
        "max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({}).",
        r.max_num_batched_tokens, r.max_num_seqs));
  return r;
}

}  // namespace pagoda
