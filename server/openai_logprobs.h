// Logprobs in OpenAI's two wire formats, for one choice, built
// incrementally (a stream's chunks each carry their tokens' entries):
//   completions: {"tokens": [str], "token_logprobs": [num], "top_logprobs":
//     [{str: num}], "text_offset": [int]}: text_offset is each token's start
//     in the choice's text, in characters (Python len, i.e. code points);
//     top_logprobs holds the k most likely tokens plus the sampled one, most
//     likely first (the sampled one last when it is not among the k).
//   chat: {"content": [{"token", "logprob", "bytes": [int], "top_logprobs":
//     [{"token", "logprob", "bytes"}]}]}: top_logprobs the k most likely,
//     most likely first.
// Both are ordered_json: a top_logprobs object's keys keep their rank order
// (nlohmann::json would sort them by token text).
// As vLLM's serving_completion.py / serving_chat.py write them. A token's
// string is its incremental decoding after the preceding ids (vLLM's
// detokenize_incrementally), so the strings of the sampled tokens join into
// the text and keep SentencePiece's leading space. Logprobs are natural
// logs; -inf becomes -9999.0 (vLLM's clamp, JSON has no infinity).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

class ChoiceLogprobs {
 public:
  // context_ids: the prompt's ids (only the last few are used); text_offset:
  // where the completion's text starts (echo: the prompt's length).
  ChoiceLogprobs(const Tokenizer& tok, const std::vector<int32_t>& context_ids,
                 int64_t text_offset = 0);

  // Completions format for the next tokens (entries parallel to lps).
  nlohmann::ordered_json completion(const std::vector<TokenLogprob>& lps);
  // Chat format for the next tokens: {"content": [...]}.
  nlohmann::ordered_json chat(const std::vector<TokenLogprob>& lps);
  // Characters of text so far: the next token's text_offset.
  int64_t offset() const { return offset_; }

 private:
  std::string token_text(int32_t id) const;
  void advance(int32_t id, const std::string& text);

  const Tokenizer& tok_;
  std::vector<int32_t> window_;  // the last few ids decoded so far
  int64_t offset_ = 0;           // characters of text so far
};

// Number of Unicode code points in UTF-8 text (Python's len).
int64_t utf8_length(const std::string& s);

}  // namespace pagoda
