// DeviceSamplingBatch: one step's sampling work for a device sampler
// (gpu/gpu_sampler.h), in a backend-neutral form built by the ModelRunner.
//
// Every SamplingParams feature the host Sampler has (engine/sample/sampler.h)
// is expressed per output row, in the host Sampler's order of operations:
//  0. raw logprobs: the row's log-softmax before anything below, the sampled
//     token's and, for logprobs = k > 0, the k most likely (ties: lower id);
//  1. allowed_token_ids: ids outside `allow` get -inf; a guided-decoding
//     row (mask_begin >= 0) also: ids whose bit is clear in its mask get
//     -inf (the host Sampler's guided mask, EOS bits set by the host where
//     the automaton allows EOS);
//  2. `ban` ids get -inf (min_tokens' EOS / stop_token_ids, the last token
//     of a bad word whose other tokens end the output);
//  3. logit_bias: `bias` pairs added to the logits;
//  4. penalties from the row's penalty slot (a per-sequence count of every
//     vocabulary id, kept on the device): repetition_penalty on ids in the
//     prompt or output, then frequency (x output count) and presence;
//  5. greedy argmax, or temperature / min_p / top_k / top_p and a seeded
//     draw.
// Penalty slots live on the device across steps: a sequence keeps its slot
// while it samples every step; the device adds each sampled id to its slot
// (no host round trip). A slot is (re)built from the host's ids only when a
// sequence starts sampling (first token, resume after preemption):
// `inits` lists those. Each row names the logits row it reads (`src_row`;
// several rows may read one). Plain structs (the CUDA kernels include
// this header, compiled as C++17); engine/sample/device_rows.h builds them.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace pagoda {

struct DeviceSampleRow {
  int32_t src_row = 0;             // logits row (in [0, logits rows))
  float temperature = 0.f;         // < 1e-5: greedy
  int32_t top_k = 0;               // <= 0: off
  float top_p = 1.f;               // (0, 1]
  float min_p = 0.f;               // [0, 1]
  float repetition_penalty = 1.f;  // > 0; 1: off
  float frequency_penalty = 0.f;
  float presence_penalty = 0.f;
  int32_t slot = -1;      // penalty slot, -1: none (no penalty)
  // -1: none; 0: the sampled token's logprob and rank; k: + the top k (<= 20)
  int32_t logprobs = -1;
  // Ranges of DeviceSamplingBatch::ids (allow, ban) and ::bias.
  int32_t allow_begin = 0, allow_count = 0;
  int32_t ban_begin = 0, ban_count = 0;
  int32_t bias_begin = 0, bias_count = 0;
  // Guided decoding: >= 0: the row's allowed-token bitmask starts at
  // DeviceSamplingBatch::mask_words[mask_begin] and spans ceil(vocab / 32)
  // words (bit id % 32 of word id / 32; ids >= the mask's vocabulary
  // clear). -1: no mask (an unconstrained row uploads and reads nothing).
  int32_t mask_begin = -1;
  // The id chosen when the masks leave no id (every logit -inf): 0, or a
  // guided row's first EOS id, which ends its output (as the host
  // Sampler::sample does).
  int32_t empty_id = 0;
  uint64_t seed = 0;  // the draw's 64-bit key for this row and step
  // >= 0: a score row (prompt logprobs, engine/sample/prompt_logprobs.h):
  // nothing is drawn and no slot is touched; the result is this token with
  // its raw logprob, its rank (the number of ids whose logit is >= its own,
  // itself included) and the `logprobs` most likely. Such a row has
  // logprobs >= 0 and no allow / ban / bias / slot.
  int32_t score_token = -1;
};

// A penalty slot to (re)build before sampling: zeroed, then every id of
// ids[prompt_begin, +prompt_count) marked "in the prompt" and every id of
// ids[output_begin, +output_count) counted once per occurrence.
struct DeviceSlotInit {
  int32_t slot = 0;
  int32_t prompt_begin = 0, prompt_count = 0;
  int32_t output_begin = 0, output_count = 0;
};

struct DeviceSamplingBatch {
  std::vector<DeviceSampleRow> rows;  // one per sampled token, in output order
  std::vector<DeviceSlotInit> inits;
  std::vector<int32_t> ids;                     // allow / ban / init id lists
  std::vector<std::pair<int32_t, float>> bias;  // (id, bias) pairs
  std::vector<uint32_t> mask_words;             // guided rows' bitmasks
  int32_t num_slots = 0;                        // slots the batch uses: every slot < num_slots
  // append_guided_mask's index of the masks already in mask_words (host
  // only): (the guide state's TokenMask, EOS added) -> mask_begin, so rows
  // in one state share one copy.
  std::vector<std::pair<std::pair<const void*, bool>, int32_t>> mask_keys;
  // Work the batch still needs before a sampler reads it (ModelRunner: the
  // guided rows' masks, filled while the step's forward runs). An executor
  // calls prepare() once the forward is enqueued and before sampling
  // (ModelExecutor::execute_and_sample); it runs the work once and clears it.
  mutable std::function<void()> deferred;
  void prepare() const {
    if (!deferred) return;
    std::function<void()> f = std::move(deferred);
    deferred = nullptr;
    f();
  }

  void clear() {
    rows.clear();
    inits.clear();
    ids.clear();
    bias.clear();
    mask_words.clear();
    mask_keys.clear();
    deferred = nullptr;
    num_slots = 0;
  }
  bool has_score_rows() const {
    for (const DeviceSampleRow& r : rows)
      if (r.score_token >= 0) return true;
    return false;
  }
  bool wants_logprobs() const {
    for (const DeviceSampleRow& r : rows)
      if (r.logprobs >= 0) return true;
    return false;
  }
};

}  // namespace pagoda
