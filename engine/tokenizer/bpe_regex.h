// The regex pre-tokenizer of HF byte-level BPE (tokenizers'
// pre_tokenizers/split.rs with SplitDelimiterBehavior::Isolated), on PCRE2
// (https://www.pcre.org, 8-bit library, PCRE2_UTF | PCRE2_UCP so \p{L},
// \p{N} and \s follow Unicode; JIT-compiled when the library supports it).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::bpe {

// Qwen2's Split pattern (tokenizer.json of Qwen2/Qwen2.5), used for
// vocab.json + merges.txt directories that carry no tokenizer.json.
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2's pattern (HF ByteLevel pre-tokenizer with use_regex=true).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// True when built with PCRE2 (PAGODA_HAVE_BPE).
bool regex_available();

class RegexSplitter {
 public:
  // Compiles `pattern` (PCRE2 syntax; HF's Onig/fancy-regex patterns for
  // these tokenizers are valid PCRE2). Throws std::runtime_error with PCRE2's
  // message and offset when it does not compile, or when built without PCRE2.
  explicit RegexSplitter(std::string_view pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits valid UTF-8 `text` into consecutive pieces covering it: every
  // match and every non-empty gap between matches (Isolated behaviour);
  // empty matches produce no piece. Thread-safe (match data per call).
  // Throws std::runtime_error on a PCRE2 matching error (e.g. invalid UTF-8).
  std::vector<std::string_view> split(std::string_view text) const;
  // The same pieces, in order, to visit (no vector: memory O(1) in the
  // text's length); visit returning false stops the split there.
  void for_each(std::string_view text, const std::function<bool(std::string_view)>& visit) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::bpe
