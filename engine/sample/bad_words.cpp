#include "engine/sample/bad_words.h"

#include <algorithm>

namespace pagoda {

void append_bad_word_bans(const SamplingParams& sp, std::span<const int32_t> output_ids,
                          std::vector<int32_t>& bans) {
  for (const std::vector<int32_t>& word : sp.bad_words_token_ids) {
    if (word.empty() || word.size() > output_ids.size() + 1) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(prefix),
                   output_ids.end() - static_cast<std::ptrdiff_t>(prefix)))
      bans.push_back(word.back());
  }
}

void append_sampling_bans(const SamplingParams& sp, std::span<const int32_t> output_ids,
                          const std::vector<int32_t>& eos_token_ids, std::vector<int32_t>& bans) {
  if (static_cast<int64_t>(output_ids.size()) < sp.min_tokens) {
    if (!sp.ignore_eos) bans.insert(bans.end(), eos_token_ids.begin(), eos_token_ids.end());
    bans.insert(bans.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
  }
  append_bad_word_bans(sp, output_ids, bans);
}

}  // namespace pagoda
