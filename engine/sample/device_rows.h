// Building a DeviceSamplingBatch (engine/sample/device_sampling.h) from
// SamplingParams: what the ModelRunner passes for each sampled token, and
// what tests hand a device sampler directly.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sample/device_sampling.h"
#include "engine/sample/sampling_params.h"

namespace pagoda {

namespace guided {
struct TokenMask;
}  // namespace guided

// True when sp sets a penalty, so its row needs a penalty slot.
bool needs_penalty_slot(const SamplingParams& sp);

// Appends the row of one sequence's next token to b (what the ModelRunner
// passes for it): sp's settings (greedy as temperature 0, logprobs when
// Sampler::wants_logprob, capped at 20), its allowed ids, the bans of
// append_sampling_bans(sp, output_ids, eos_token_ids) and its logit_bias.
// slot stays -1: the caller sets it (and adds an init with
// append_slot_init) when needs_penalty_slot(sp). Returns the row.
DeviceSampleRow& append_sample_row(DeviceSamplingBatch& b, const SamplingParams& sp,
                                   std::span<const int32_t> output_ids,
                                   const std::vector<int32_t>& eos_token_ids, int32_t src_row,
                                   uint64_t seed);

// Guided decoding: appends the row's allowed-token bitmask (ceil(vocab /
// 32) words) to b.mask_words, unless a row of this batch already added the
// same mask with the same EOS rule (b.mask_keys; then it shares that copy;
// `mask` must stay alive and unchanged while b is built), and points
// r.mask_begin at it: the bits of
// `mask` (the guide state's text tokens), plus eos_token_ids when
// `accepting` or the mask is empty (as the host Sampler; a constraint the
// vocabulary cannot continue ends), and sets r.empty_id to the first EOS
// id: a row whose masks (this one and allowed_token_ids) leave no id ends
// its output, as the host Sampler::sample. vocab: the logits rows' width.
void append_guided_mask(DeviceSamplingBatch& b, DeviceSampleRow& r, const guided::TokenMask& mask,
                        bool accepting, const std::vector<int32_t>& eos_token_ids, int64_t vocab);

// Appends the init that (re)builds penalty slot `slot` from a sequence's
// prompt and output ids.
void append_slot_init(DeviceSamplingBatch& b, int32_t slot, std::span<const int32_t> prompt_ids,
                      std::span<const int32_t> output_ids);

}  // namespace pagoda
