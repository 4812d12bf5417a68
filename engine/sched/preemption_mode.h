// PreemptionMode: how the Scheduler frees a running sequence's KV blocks
// when another needs them (vLLM's --preemption-mode, vllm/core/scheduler.py
// PreemptionMode). kRecompute drops the blocks and re-prefills the sequence
// later (prompt + output so far); kSwap copies them to the host swap space
// (--swap-space) and copies them back before it resumes. Unset (vLLM's
// default, preemption_mode None): recompute for a request with one running
// sequence, swap for one with several unfinished (n > 1 / best_of), as
// vLLM v0's Scheduler._preempt.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

namespace pagoda {

enum class PreemptionMode { kRecompute, kSwap };

inline const char* preemption_mode_name(PreemptionMode m) {
  return m == PreemptionMode::kSwap ? "swap" : "recompute";
}

// "recompute" | "swap"; "" = unset (vLLM's default rule). Throws
// std::invalid_argument naming the value and the choices otherwise.
inline std::optional<PreemptionMode> parse_preemption_mode(const std::string& s) {
  if (s.empty()) return std::nullopt;
  if (s == "recompute") return PreemptionMode::kRecompute;
  if (s == "swap") return PreemptionMode::kSwap;
  throw std::invalid_argument("preemption mode '" + s + "' is not one of recompute, swap");
}

}  // namespace pagoda
