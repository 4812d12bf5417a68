#include "engine/sample/device_rows.h"

#include <algorithm>

#include "engine/guided/guide.h"
#include "engine/sample/bad_words.h"
#include "engine/sample/sampler.h"

namespace pagoda {

bool needs_penalty_slot(const SamplingParams& sp) {
  return sp.repetition_penalty != 1.f || sp.frequency_penalty != 0.f || sp.presence_penalty != 0.f;
}

DeviceSampleRow& append_sample_row(DeviceSamplingBatch& b, const SamplingParams& sp,
                                   std::span<const int32_t> output_ids,
                                   const std::vector<int32_t>& eos_token_ids, int32_t src_row,
                                   uint64_t seed) {
  DeviceSampleRow r;
  r.src_row = src_row;
  r.temperature = sp.greedy() ? 0.f : sp.temperature;
  r.top_k = sp.top_k;
  r.top_p = sp.top_p;
  r.min_p = sp.min_p;
  r.repetition_penalty = sp.repetition_penalty;
  r.frequency_penalty = sp.frequency_penalty;
  r.presence_penalty = sp.presence_penalty;
  if (Sampler::wants_logprob(sp)) r.logprobs = std::clamp(sp.logprobs.value_or(0), 0, kMaxLogprobs);
  r.allow_begin = static_cast<int32_t>(b.ids.size());
  b.ids.insert(b.ids.end(), sp.allowed_token_ids.begin(), sp.allowed_token_ids.end());
  r.allow_count = static_cast<int32_t>(sp.allowed_token_ids.size());
  r.ban_begin = static_cast<int32_t>(b.ids.size());
  append_sampling_bans(sp, output_ids, eos_token_ids, b.ids);
  r.ban_count = static_cast<int32_t>(b.ids.size()) - r.ban_begin;
  r.bias_begin = static_cast<int32_t>(b.bias.size());
  b.bias.insert(b.bias.end(), sp.logit_bias.begin(), sp.logit_bias.end());
  r.bias_count = static_cast<int32_t>(sp.logit_bias.size());
  r.seed = seed;
  b.rows.push_back(r);
  return b.rows.back();
}

void append_guided_mask(DeviceSamplingBatch& b, DeviceSampleRow& r, const guided::TokenMask& mask,
                        bool accepting, const std::vector<int32_t>& eos_token_ids, int64_t vocab) {
  const size_t words = static_cast<size_t>((vocab + 31) / 32);
  r.empty_id = eos_token_ids.empty() ? 0 : eos_token_ids.front();
  // Rows in the same state (and EOS rule) share one copy of the words.
  const std::pair<const void*, bool> key{&mask, accepting || mask.count == 0};
  for (const auto& [k, begin] : b.mask_keys)
    if (k == key) {
      r.mask_begin = begin;
      return;
    }
  r.mask_begin = static_cast<int32_t>(b.mask_words.size());
  b.mask_keys.emplace_back(key, r.mask_begin);
  b.mask_words.resize(b.mask_words.size() + words, 0u);
  uint32_t* w = b.mask_words.data() + r.mask_begin;
  const size_t have = std::min(words, mask.words.size() * 2);
  for (size_t i = 0; i < have; ++i)
    w[i] = static_cast<uint32_t>(mask.words[i / 2] >> (32 * (i % 2)));
  if (vocab % 32 != 0 && have == words)
    w[words - 1] &= (1u << (vocab % 32)) - 1u;  // no ids >= vocab
  if (accepting || mask.count == 0)
    for (int32_t id : eos_token_ids)
      if (id >= 0 && id < vocab) w[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
}

void append_slot_init(DeviceSamplingBatch& b, int32_t slot, std::span<const int32_t> prompt_ids,
                      std::span<const int32_t> output_ids) {
  DeviceSlotInit in;
  in.slot = slot;
  in.prompt_begin = static_cast<int32_t>(b.ids.size());
  in.prompt_count = static_cast<int32_t>(prompt_ids.size());
  b.ids.insert(b.ids.end(), prompt_ids.begin(), prompt_ids.end());
  in.output_begin = static_cast<int32_t>(b.ids.size());
  in.output_count = static_cast<int32_t>(output_ids.size());
  b.ids.insert(b.ids.end(), output_ids.begin(), output_ids.end());
  b.inits.push_back(in);
}

}  // namespace pagoda
