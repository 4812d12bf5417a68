// Beam search over the engine, as HF transformers' GenerationMixin._beam_search
// (transformers 4.5x / 5.x: _get_top_k_continuations,
// _get_running_beams_for_next_iteration, _update_finished_beams,
// _check_early_stop_heuristic, _beam_search_has_unfinished_sequences) for
// one prompt, and placed where vLLM v1 puts it: above the engine, each step
// one next-token request per running beam, the beams' shared prefix reused
// through the prefix cache (vllm/entrypoints/llm.py LLM.beam_search).
//
// A step: every running beam's top-K next tokens (log-softmax of the model's
// logits, fp32), K = max(2, 1 + #eos ids) · beam_width; the K best
// continuations by cumulative logprob (fp32 sums, as HF); a continuation ends
// its beam when its token is an eos id or the beam reaches max_tokens; the
// best beam_width of the rest run on; one that ended among the first
// beam_width continuations is a finished hypothesis scored
// cumulative_logprob / generated_length ^ length_penalty (its length counts
// the eos token) and kept if it is among the beam_width best finished so far.
// Stops when no running beam can improve on the worst kept hypothesis
// (early_stopping false: judged at the current length; "never": at
// max_tokens when length_penalty > 0), when beam_width hypotheses are kept
// and early_stopping is true, or at max_tokens.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pagoda {

class Engine;

enum class EarlyStopping { kFalse, kTrue, kNever };

struct BeamSearchParams {
  int beam_width = 4;       // HF num_beams / vLLM n with use_beam_search; >= 1
  int64_t max_tokens = 16;  // new tokens; >= 1
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  std::vector<int32_t> eos_token_ids;  // a continuation with one of these finishes its beam
};

// K, the next-token candidates each step asks for per running beam (HF's
// max(2, 1 + #eos ids) · num_beams: enough that beam_width continuations
// survive even when the eos ids are among the best); the engine computes
// them as top logprobs, so K is bounded by max_logprobs.
inline int beam_candidates(int beam_width, size_t num_eos_ids) {
  return std::max<int>(2, 1 + static_cast<int>(num_eos_ids)) * beam_width;
}

struct BeamHypothesis {
  std::vector<int32_t>
      token_ids;  // generated tokens (the eos token included when it ended the beam)
  float cumulative_logprob = 0.0f;  // sum of the tokens' logprobs
  float score = 0.0f;               // cumulative_logprob / token_ids.size() ^ length_penalty
};

// One beam search, a step at a time (for callers that wait for the engine
// asynchronously, e.g. server/generation_group.h): pending() are the
// sequences (prompt + generated tokens) whose next-token candidates the next
// advance() needs, k() how many each; advance() takes them (for each
// sequence, up to k (token id, logprob) pairs, most likely first) and runs
// the step. Once done(), result() is beam_search's answer.
class BeamSearch {
 public:
  // Throws std::invalid_argument for beam_width < 1 or max_tokens < 1.
  BeamSearch(std::vector<int32_t> prompt, BeamSearchParams params);
  bool done() const { return done_; }
  const std::vector<std::vector<int32_t>>& pending() const { return pending_; }
  int k() const { return k_; }
  // lists.size() must be pending().size() (std::invalid_argument otherwise).
  void advance(const std::vector<std::vector<std::pair<int32_t, float>>>& lists);
  // The finished hypotheses, best score first.
  std::vector<BeamHypothesis> result() const;
  const BeamSearchParams& params() const { return p_; }

 private:
  struct Running {
    std::vector<int32_t> tokens;  // generated
    float score = 0.0f;           // cumulative logprob (-1e9 added when it had ended)
    float cum = 0.0f;
  };
  struct Slot {
    BeamHypothesis hyp;
    bool finished = false;
  };
  void set_pending();
  std::vector<int32_t> prompt_;
  BeamSearchParams p_;
  int k_ = 0;
  int64_t cur_ = 0;  // tokens generated so far
  bool done_ = false;
  bool heuristic_unsatisfied_ = true;
  std::vector<Running> running_;
  std::vector<Slot> slots_;
  std::vector<std::vector<int32_t>> pending_;
};

// One step's next-token candidates: for each sequence (prompt + generated
// tokens), up to k (token id, logprob) pairs of its next position, most
// likely first.
using NextTokenLogprobs = std::function<std::vector<std::vector<std::pair<int32_t, float>>>(
    const std::vector<std::vector<int32_t>>& sequences, int k)>;

// The finished hypotheses of a beam search from `prompt`, best score first
// (beam_width of them, or fewer if fewer finished). Throws
// std::invalid_argument for beam_width < 1 or max_tokens < 1.
std::vector<BeamHypothesis> beam_search(const std::vector<int32_t>& prompt,
                                        const BeamSearchParams& params,
                                        const NextTokenLogprobs& next);

// NextTokenLogprobs through `engine`: one request per sequence (max_tokens 1,
// logprobs k, greedy, ignore_eos; ids "<id_prefix>-<step>-<i>"), all queued
// at once. step_engine: this thread runs Engine::step() until they finish
// (an engine with no thread of its own); otherwise it waits on their output
// channels. Throws std::runtime_error when a request fails (its error).
NextTokenLogprobs engine_next_token_logprobs(Engine& engine, std::string id_prefix,
                                             bool step_engine);

}  // namespace pagoda
