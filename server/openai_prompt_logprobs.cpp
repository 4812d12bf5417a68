// Prompt logprobs on the wire (server/openai_prompt_logprobs.h).
#include "server/openai_prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "server/openai_logprobs.h"

namespace pagoda {

using json = nlohmann::ordered_json;

namespace {

double clamp_logprob(float lp) {
  if (std::isnan(lp)) return -9999.0;
  return std::max(static_cast<double>(lp), -9999.0);
}

std::string decode_alone(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return "";
  return tok.decode(std::vector<int32_t>{id}, /*skip_special_tokens=*/false);
}

}  // namespace

std::string decoded_token(const Tokenizer& tok, int32_t id) {
  std::string text = decode_alone(tok, id);
  static const std::string kMarker = "\xE2\x96\x81";  // U+2581
  const std::string piece = tok.id_to_piece(id);
  size_t markers = 0;
  while (piece.compare(markers * kMarker.size(), kMarker.size(), kMarker) == 0) ++markers;
  size_t spaces = 0;
  while (spaces < text.size() && text[spaces] == ' ') ++spaces;
  if (markers > spaces) text.insert(0, markers - spaces, ' ');
  return text;
}

namespace {

std::string decoded(const Tokenizer& tok, int32_t id) { return decoded_token(tok, id); }

}  // namespace

json prompt_logprobs_json(const Tokenizer& tok, const std::vector<PromptLogprob>& lps) {
  json out = json::array({nullptr});
  for (const PromptLogprob& lp : lps) {
    // Rank order: the k most likely, then the prompt token when it is not
    // among them (a top entry for it keeps its top-k rank).
    json entry = json::object();
    for (size_t i = 0; i < lp.top.size(); ++i) {
      const auto [id, v] = lp.top[i];
      entry[std::to_string(id)] = {{"logprob", clamp_logprob(v)},
                                   {"rank", static_cast<int64_t>(i) + 1},
                                   {"decoded_token", decoded(tok, id)}};
    }
    const std::string own = std::to_string(lp.token_id);
    if (!entry.contains(own))
      entry[own] = {{"logprob", clamp_logprob(lp.logprob)},
                    {"rank", lp.rank},
                    {"decoded_token", decoded(tok, lp.token_id)}};
    out.push_back(std::move(entry));
  }
  return out;
}

json echo_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                        const std::vector<PromptLogprob>& lps, int64_t* offset_after) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  if (prompt_ids.empty()) {
    if (offset_after) *offset_after = 0;
    return out;
  }
  // The first token has no logprob (vLLM: decoded alone, null, null).
  const std::string first = decode_alone(tok, prompt_ids.front());
  out["tokens"].push_back(first);
  out["token_logprobs"].push_back(nullptr);
  out["top_logprobs"].push_back(nullptr);
  out["text_offset"].push_back(0);
  // The rest, decoded incrementally after the ids before them, exactly as
  // sampled tokens' entries are.
  std::vector<TokenLogprob> rest;
  for (const PromptLogprob& lp : lps) rest.push_back(TokenLogprob{lp.token_id, lp.logprob, lp.top});
  ChoiceLogprobs cl(tok, {prompt_ids.front()}, utf8_length(first));
  append_logprobs_json(out, cl.completion(rest));
  if (offset_after) *offset_after = cl.offset();
  return out;
}

void append_logprobs_json(json& a, const json& b) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const json& v : b.at(key)) a[key].push_back(v);
}

const std::vector<PromptLogprob>* find_prompt_logprobs(const std::vector<RequestOutput>& choices,
                                                       int index, int n) {
  const int prompt = index / std::max(1, n);
  for (const RequestOutput& c : choices)
    if (c.index / std::max(1, n) == prompt && c.prompt_logprobs) return &*c.prompt_logprobs;
  return nullptr;
}

}  // namespace pagoda
