#include "loadtest/bench/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw std::runtime_error(fmt::format("{} is not valid JSON", path));
  return j;
}

std::vector<SampleRequest> sample_sharegpt(const json& data, const Tokenizer& tokenizer,
                                           int64_t num_requests, uint64_t seed,
                                           std::optional<int64_t> output_len) {
  if (!data.is_array())
    throw std::runtime_error("ShareGPT data must be a JSON list of conversations");
  std::vector<const json*> entries;
  for (const json& e : data) {
    if (!e.is_object() || !e.contains("conversations")) continue;
    const json& c = e["conversations"];
    if (c.is_array() && c.size() >= 2) entries.push_back(&e);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(entries.begin(), entries.end(), rng);
  std::vector<SampleRequest> out;
  for (const json* e : entries) {
    if (static_cast<int64_t>(out.size()) >= num_requests) break;
    const json& c = (*e)["conversations"];
    const json* p = c[0].is_object() ? &c[0] : nullptr;
    const json* r = c[1].is_object() ? &c[1] : nullptr;
    if (!p || !r || !p->contains("value") || !r->contains("value") || !(*p)["value"].is_string() ||
        !(*r)["value"].is_string())
      continue;
    SampleRequest s;
    s.prompt = (*p)["value"].get<std::string>();
    s.prompt_token_ids = tokenizer.encode(s.prompt, true);
    s.prompt_len = static_cast<int64_t>(s.prompt_token_ids.size());
    s.expected_output_len =
        output_len
            ? *output_len
            : static_cast<int64_t>(tokenizer.encode((*r)["value"].get<std::string>(), true).size());
    if (!is_valid_sequence(s.prompt_len, s.expected_output_len, output_len.has_value())) continue;
    out.push_back(std::move(s));
  }
  if (out.empty()) throw std::runtime_error("no ShareGPT conversation passes the length filter");
  if (static_cast<int64_t>(out.size()) < num_requests) {
    std::mt19937_64 again(seed);
    std::uniform_int_distribution<size_t> pick(0, out.size() - 1);
    while (static_cast<int64_t>(out.size()) < num_requests) out.push_back(out[pick(again)]);
  }
  return out;
}

std::vector<SampleRequest> sample_random(const Tokenizer& tokenizer, int64_t num_requests,
                                         const RandomSpec& spec, uint64_t seed) {
  if (!(spec.range_ratio >= 0.0 && spec.range_ratio < 1.0))
    throw std::invalid_argument(
        fmt::format("--random-range-ratio must be in [0, 1), got {}", spec.range_ratio));
  if (spec.input_len < 0 || spec.output_len < 0 || spec.prefix_len < 0)
    throw std::invalid_argument("random lengths must not be negative");
  const int64_t vocab = tokenizer.vocab_size();
  if (vocab <= 0) throw std::invalid_argument("the tokenizer has an empty vocabulary");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < spec.prefix_len; ++i) prefix.push_back(static_cast<int32_t>(token(rng)));
  // int() truncates toward zero, as Python's does for these non-negative values.
  const auto lo = [&](int64_t x) {
    return static_cast<int64_t>(static_cast<double>(x) * (1 - spec.range_ratio));
  };
  const auto hi = [&](int64_t x) {
    return static_cast<int64_t>(static_cast<double>(x) * (1 + spec.range_ratio));
  };
  std::uniform_int_distribution<int64_t> input_len(lo(spec.input_len), hi(spec.input_len));
  std::uniform_int_distribution<int64_t> output_len(lo(spec.output_len), hi(spec.output_len));
  std::vector<int64_t> in_lens, out_lens, offsets;
  for (int64_t i = 0; i < num_requests; ++i) in_lens.push_back(input_len(rng));
  for (int64_t i = 0; i < num_requests; ++i) out_lens.push_back(output_len(rng));
  for (int64_t i = 0; i < num_requests; ++i) offsets.push_back(token(rng));
  std::vector<SampleRequest> out;
  for (int64_t i = 0; i < num_requests; ++i) {
    const auto u = static_cast<size_t>(i);
    SampleRequest s;
    s.prompt_token_ids = prefix;
    for (int64_t j = 0; j < in_lens[u]; ++j)
      s.prompt_token_ids.push_back(static_cast<int32_t>((offsets[u] + i + j) % vocab));
    s.prompt = tokenizer.decode(s.prompt_token_ids, false);
    s.prompt_len = spec.prefix_len + in_lens[u];
    s.expected_output_len = out_lens[u];
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace pagoda::bench
