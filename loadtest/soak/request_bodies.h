// The request bodies the soak sends: well-formed completions and chats
// (random length, sampling and n), long ones meant to be interrupted,
// malformed ones (each must be a 400) and oversized prompts (beyond the
// model's context: a 400).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace pagoda::loadtest {

struct ModelInfo {
  std::string id;             // /v1/models data[0].id
  int64_t max_model_len = 0;  // /v1/models data[0].max_model_len
  bool chat = true;           // send chat requests (the server has a chat template)
};

using Rng = std::mt19937_64;

// A completion ("prompt", sometimes a list of two) or chat ("messages")
// body that ends by itself: max_tokens 1..48, sometimes n = 2, a stop
// string, top_p or a seed.
nlohmann::json short_request(Rng& rng, const ModelInfo& model, bool chat);
// The choices a response to `body` has: prompts (a list of strings counts
// each) × n.
int expected_choices(const nlohmann::json& body);
// One that runs for hundreds of tokens (ignore_eos), to be interrupted.
nlohmann::json long_request(Rng& rng, const ModelInfo& model, bool chat);
// A body that must be answered 400 on the given endpoint (raw text: some are
// not JSON at all).
std::string malformed_body(Rng& rng, bool chat);
// A well-formed body whose prompt is far beyond max_model_len tokens.
nlohmann::json oversized_prompt_request(const ModelInfo& model, bool chat);
// A /v1/ws message that must be answered with an `error` whose code is 400;
// `id` is set where the message has one (else empty).
std::string malformed_ws_message(Rng& rng, const std::string& id, bool* has_id);

}  // namespace pagoda::loadtest
