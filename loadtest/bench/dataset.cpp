#include "loadtest/bench/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace pagoda::bench {

using nlohmann::json;

bool is_valid_sequence(int64_t prompt_len, int64_t output_len, bool skip_min_output_len_check,
                       int64_t min_len, int64_t max_prompt_len, int64_t max_total_len) {
  const bool prompt_too_short = prompt_len < min_len;
  const bool output_too_short = !skip_min_output_len_check && output_len < min_len;
  const bool prompt_too_long = prompt_len > max_prompt_len;
  const bool combined_too_long = prompt_len + output_len > max_total_len;
  return !(prompt_too_short || output_too_short || prompt_too_long || combined_too_long);
}

json load_json_file(const std::string& path) {
  // A directory opens as a stream that reads nothing ("not valid JSON").
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(
        fmt::format("dataset path {} is a directory; --dataset-path takes a JSON file", path));
  if (!std::filesystem::exists(path, ec))
    throw std::runtime_error(fmt::format("dataset path {} does not exist", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(
        fmt::format("cannot read dataset path {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded())
    throw std::runtime_error(fmt::format("dataset path {} is not valid JSON", path));
  return j;
}

std::vector<int32_t> server_prompt_ids(const Tokenizer& tokenizer, const std::string& text) {
  // What encode adds around any text ([], [BOS], [EOS] or [BOS, EOS]), then
  // the text with special tokens' text read as those tokens, as the server
  // (server/prompt_tokenizer.cpp) and HF's tokenizer(text) read a prompt.
  std::vector<int32_t> ids = tokenizer.encode("", true);
  const auto bos = tokenizer.bos_token_id();
  const bool bos_first = !ids.empty() && bos && ids.front() == *bos;
  std::vector<int32_t> body = tokenizer.encode_with_special_text(text);
  ids.insert(bos_first ? ids.begin() + 1 : ids.begin(), body.begin(), body.end());
  return ids;
}

std::vector<SampleRequest> sample_sharegpt(const json& data, const Tokenizer& tokenizer,
                                           int64_t num_requests, uint64_t seed,
                                           std::optional<int64_t> output_len) {
  if (!data.is_array())
    throw std::runtime_error("ShareGPT data must be a JSON list of conversations");
  // Entries that are not a conversation (not an object with a
  // "conversations" list of at least two turns, the first two objects with
  // a string "value") are skipped, as vLLM's filter skips them, and counted
  // for the error when nothing is left.
  const auto usable = [](const json& e) {
    if (!e.is_object() || !e.contains("conversations")) return false;
    const json& c = e["conversations"];
    if (!c.is_array() || c.size() < 2) return false;
    for (size_t i = 0; i < 2; ++i)
      if (!c[i].is_object() || !c[i].contains("value") || !c[i]["value"].is_string()) return false;
    return true;
  };
  std::vector<const json*> entries;
  for (const json& e : data)
    if (usable(e)) entries.push_back(&e);
  const size_t malformed = data.size() - entries.size();
  std::mt19937_64 rng(seed);
  std::shuffle(entries.begin(), entries.end(), rng);
  std::vector<SampleRequest> out;
  for (const json* e : entries) {
    if (static_cast<int64_t>(out.size()) >= num_requests) break;
    const json& c = (*e)["conversations"];
    const json* p = &c[0];
    const json* r = &c[1];
    SampleRequest s;
    s.prompt = (*p)["value"].get<std::string>();
    s.prompt_token_ids = server_prompt_ids(tokenizer, s.prompt);
    s.prompt_len = static_cast<int64_t>(s.prompt_token_ids.size());
    s.expected_output_len =
        output_len
            ? *output_len
            : static_cast<int64_t>(tokenizer.encode((*r)["value"].get<std::string>(), true).size());
    if (!is_valid_sequence(s.prompt_len, s.expected_output_len, output_len.has_value())) continue;
    out.push_back(std::move(s));
  }
  if (out.empty()) {
    const std::string skipped =
        malformed == 0 ? std::string()
                       : fmt::format(
                             "; {} of the {} entries are not conversations (an object whose "
                             "\"conversations\" list has at least two turns, each an object with "
                             "a string \"value\") and were skipped",
                             malformed, data.size());
    if (entries.empty())
      throw std::runtime_error(fmt::format("no ShareGPT entry is a conversation{}", skipped));
    throw std::runtime_error(fmt::format(
        "no ShareGPT conversation passes the length filter ({} conversations, none with a prompt "
        "of 4 to 1024 tokens, an output of at least 4 and both within 2048{})",
        entries.size(), skipped));
  }
  if (static_cast<int64_t>(out.size()) < num_requests) {
    std::mt19937_64 again(seed);
    std::uniform_int_distribution<size_t> pick(0, out.size() - 1);
    while (static_cast<int64_t>(out.size()) < num_requests) out.push_back(out[pick(again)]);
  }
  return out;
}

void check_random_spec(const RandomSpec& spec) {
  if (!(spec.range_ratio >= 0.0 && spec.range_ratio < 1.0))
    throw std::invalid_argument(
        fmt::format("--random-range-ratio must be in [0, 1), got {}", spec.range_ratio));
  if (spec.input_len < 0 || spec.output_len < 0 || spec.prefix_len < 0)
    throw std::invalid_argument("random lengths must not be negative");
}

std::vector<SampleRequest> sample_random(const Tokenizer& tokenizer, int64_t num_requests,
                                         const RandomSpec& spec, uint64_t seed,
                                         int64_t* token_mismatch) {
  check_random_spec(spec);
  const int64_t vocab = tokenizer.vocab_size();
  if (vocab <= 0) throw std::invalid_argument("the tokenizer has an empty vocabulary");
  // Special tokens (BOS, EOS, UNK...) are never drawn; the ones the server
  // adds to every text prompt count towards --random-input-len.
  std::vector<int32_t> allowed;
  for (int64_t id = 0; id < vocab; ++id)
    if (!tokenizer.is_special(static_cast<int32_t>(id)))
      allowed.push_back(static_cast<int32_t>(id));
  if (allowed.empty()) {
    allowed.resize(static_cast<size_t>(vocab));
    std::iota(allowed.begin(), allowed.end(), 0);
  }
  const auto n_allowed = static_cast<int64_t>(allowed.size());
  const int64_t num_special = static_cast<int64_t>(tokenizer.encode("", true).size());
  const int64_t real_input_len = std::max<int64_t>(0, spec.input_len - num_special);
  const double r = spec.range_ratio;
  const auto input_lo =
      static_cast<int64_t>(std::floor(static_cast<double>(real_input_len) * (1 - r)));
  const auto input_hi =
      static_cast<int64_t>(std::ceil(static_cast<double>(real_input_len) * (1 + r)));
  // As vLLM: at least 1 output token ("prevent sampling 0 tokens").
  const int64_t output_lo = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(spec.output_len) * (1 - r))));
  const int64_t output_hi = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(static_cast<double>(spec.output_len) * (1 + r))));
  if (spec.prefix_len + input_lo < 1)
    throw std::invalid_argument(
        fmt::format("--random-input-len is too small: with the tokenizer's {} special token(s) and "
                    "--random-range-ratio {} a prompt could have no token of its own; increase "
                    "--random-input-len or --random-prefix-len",
                    num_special, r));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, n_allowed - 1);
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < spec.prefix_len; ++i)
    prefix.push_back(allowed[static_cast<size_t>(pick(rng))]);
  std::uniform_int_distribution<int64_t> input_len(input_lo, input_hi);
  std::uniform_int_distribution<int64_t> output_len(output_lo, output_hi);
  std::uniform_int_distribution<int64_t> offset(0, vocab - 1);
  std::vector<int64_t> in_lens, out_lens, offsets;
  for (int64_t i = 0; i < num_requests; ++i) in_lens.push_back(input_len(rng));
  for (int64_t i = 0; i < num_requests; ++i) out_lens.push_back(output_len(rng));
  for (int64_t i = 0; i < num_requests; ++i) offsets.push_back(offset(rng));
  int64_t mismatch_total = 0;
  std::vector<SampleRequest> out;
  for (int64_t i = 0; i < num_requests; ++i) {
    const auto u = static_cast<size_t>(i);
    std::vector<int32_t> ids = prefix;
    for (int64_t j = 0; j < in_lens[u]; ++j)
      ids.push_back(allowed[static_cast<size_t>((offsets[u] + i + j) % n_allowed)]);
    // vLLM's gen_prompt_decode_to_target_len: decode, re-encode, truncate
    // or pad with random allowed ids, until the text re-encodes to the
    // target length (at most 10 rounds; what is left is reported).
    const auto target = static_cast<size_t>(spec.prefix_len + in_lens[u]);
    std::string text;
    for (int round = 0;; ++round) {
      text = tokenizer.decode(ids, false);
      ids = tokenizer.encode_with_special_text(text);
      if (ids.size() == target || round == 10) break;
      if (ids.size() > target)
        ids.resize(target);
      else
        while (ids.size() < target) ids.push_back(allowed[static_cast<size_t>(pick(rng))]);
    }
    // Still longer (byte-fallback pieces decode to invalid UTF-8, whose
    // U+FFFD re-encodes to three byte tokens; vLLM keeps the excess): cut
    // the ids shorter until the text re-encodes to at most the target, so
    // a prompt never exceeds the length asked for.
    for (size_t cut = target; ids.size() > target && cut > 0;) {
      cut = std::min(cut, target) - std::min(cut, ids.size() - target);
      ids.resize(cut);
      text = tokenizer.decode(ids, false);
      ids = tokenizer.encode_with_special_text(text);
    }
    mismatch_total += static_cast<int64_t>(ids.size()) - static_cast<int64_t>(target);
    SampleRequest s;
    s.prompt = std::move(text);
    s.prompt_token_ids = server_prompt_ids(tokenizer, s.prompt);
    s.prompt_len = static_cast<int64_t>(s.prompt_token_ids.size());
    s.expected_output_len = out_lens[u];
    out.push_back(std::move(s));
  }
  if (token_mismatch) *token_mismatch = mismatch_total;
  return out;
}

}  // namespace pagoda::bench
