// The benchmark's prompts, sampled as vLLM's benchmarks/benchmark_dataset.py
// samples them: ShareGPT conversations (first turn the prompt, second the
// reply whose length is the output length) and random token sequences.
// Lengths are counted with the model's own tokenizer (engine/tokenizer).
// Draws use std::mt19937_64 seeded with --seed: the same procedure as
// vLLM's, not the same draws as Python's and numpy's generators.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda::bench {

struct SampleRequest {
  std::string prompt;                     // the prompt's text
  std::vector<int32_t> prompt_token_ids;  // its ids (sent instead with --prompt-token-ids)
  int64_t prompt_len = 0;                 // tokens, as vLLM counts them (see each sampler)
  int64_t expected_output_len = 0;        // max_tokens asked for
};

// vLLM's is_valid_sequence: false when the prompt or (unless
// skip_min_output_len_check) the output is under min_len tokens, the
// prompt is over max_prompt_len, or prompt + output is over max_total_len.
bool is_valid_sequence(int64_t prompt_len, int64_t output_len,
                       bool skip_min_output_len_check = false, int64_t min_len = 4,
                       int64_t max_prompt_len = 1024, int64_t max_total_len = 2048);

// Reads and parses a dataset's JSON file. Throws std::runtime_error naming
// it ("dataset path /tmp is a directory; ...") when it is a directory, does
// not exist, cannot be read or is not JSON.
nlohmann::json load_json_file(const std::string& path);

// The ids the server reads a completions text prompt as: the tokenizer's
// special tokens (BOS; EOS where configured) around the text, special-token
// text inside it ("<s>") read as those tokens (server/prompt_tokenizer.cpp;
// HF's tokenizer(text) does the same).
std::vector<int32_t> server_prompt_ids(const Tokenizer& tokenizer, const std::string& text);

// vLLM's ShareGPT sampling of `data` (a list of {"conversations": [{"from",
// "value"}, ...]}): entries with fewer than two turns are dropped, the rest
// shuffled (seed), then taken in order while fewer than num_requests: the
// prompt is turn 0's value, prompt_len its token count with special tokens
// (server_prompt_ids, as HF's tokenizer(text) counts, BOS included); the output length is turn 1's
// count the same way, or output_len when given; entries failing is_valid_sequence (the minimum
// output check skipped when output_len is given) are skipped. Fewer valid
// entries than num_requests: drawn again at random from the valid ones
// (vLLM's oversampling). Throws std::runtime_error when `data` is not a list
// or no entry is valid.
std::vector<SampleRequest> sample_sharegpt(const nlohmann::json& data, const Tokenizer& tokenizer,
                                           int64_t num_requests, uint64_t seed,
                                           std::optional<int64_t> output_len);

struct RandomSpec {
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;  // in [0, 1)
  int64_t prefix_len = 0;    // fixed random tokens before each prompt
};

// Throws std::invalid_argument for r outside [0, 1) or a negative length
// (what sample_random refuses before it draws; pagoda-bench checks it with
// its other options).
void check_random_spec(const RandomSpec& spec);

// vLLM's RandomDataset (vllm/benchmarks/datasets.py). The tokens the
// server adds to every text prompt (BOS: tokenizer.encode("", true)) count
// towards input_len: L = max(0, input_len - those). Input lengths are drawn
// uniformly from the integers in [floor(L (1 - r)), ceil(L (1 + r))],
// output lengths from [max(1, floor(output_len (1 - r))), max(1,
// ceil(output_len (1 + r)))] (never 0); each prompt is prefix_len fixed
// random ids, then allowed[(offset + i + j) mod |allowed|] for j < its
// input length (allowed: the ids that are not special tokens; offset drawn
// per request). As vLLM's gen_prompt_decode_to_target_len, those ids are
// decoded, the text re-encoded, truncated or padded with random allowed ids
// and decoded again until it re-encodes to prefix_len + its input length (at
// most 10 rounds). prompt is that text, prompt_token_ids
// server_prompt_ids(prompt) and prompt_len their count: exactly what the
// server counts for the text (vLLM's prompt_len leaves the special tokens
// out). *token_mismatch (when given): the sum over prompts of (re-encoded
// length - target) left after the rounds, vLLM's warning. Throws
// std::invalid_argument as check_random_spec, or for an input length that
// leaves a prompt no token of its own.
std::vector<SampleRequest> sample_random(const Tokenizer& tokenizer, int64_t num_requests,
                                         const RandomSpec& spec, uint64_t seed,
                                         int64_t* token_mismatch = nullptr);

}  // namespace pagoda::bench
