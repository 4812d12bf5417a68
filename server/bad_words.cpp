#include "server/bad_words.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>

#include "server/prompt_tokenizer.h"

namespace pagoda {

namespace {

// Python's str.lstrip() for the ASCII whitespace a word can start with.
std::string_view lstrip(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' ||
                          s[i] == '\f' || s[i] == '\v'))
    ++i;
  return s.substr(i);
}

}  // namespace

std::vector<std::vector<int32_t>> bad_words_token_ids(const Tokenizer& tok,
                                                      const std::vector<std::string>& words) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& word : words) {
    const std::string_view stripped = lstrip(word);
    std::vector<int32_t> plain = encode_prompt(tok, stripped, /*add_special_tokens=*/false);
    if (plain.empty())
      throw std::invalid_argument(
          fmt::format("bad_words contains '{}', which encodes to no tokens", word));
    std::string with_space(1, ' ');  // appended: GCC 12's -Wrestrict misfires on " " + string
    with_space.append(stripped);
    std::vector<int32_t> spaced = encode_prompt(tok, with_space, /*add_special_tokens=*/false);
    const bool keep_spaced =
        !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
    out.push_back(std::move(plain));
    if (keep_spaced) out.push_back(std::move(spaced));
  }
  return out;
}

}  // namespace pagoda
