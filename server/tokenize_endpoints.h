// vLLM's POST /tokenize and POST /detokenize (vllm/entrypoints/openai/
// serving_tokenization.py), pure functions of (body, ServingModel):
//   /tokenize {"model"?, "prompt": string | [int] (one prompt, parsed by
//              completion_prompts as /v1/completions parses it),
//              "add_special_tokens": true}
//          or {"model"?, "messages": [...], "add_generation_prompt": true,
//              "add_special_tokens": false}
//     → {"count", "max_model_len", "tokens": [int], "token_strs"}: with
//     "return_token_strs": true, token_strs is each id's vocabulary piece
//     (Tokenizer::id_to_piece, as HF convert_ids_to_tokens: "▁Once",
//     "<0x0A>", "Ġthe"), else null.
//     (the chat form renders the chat template exactly as
//     /v1/chat/completions does, so count is that request's prompt_tokens).
//   /detokenize {"model"?, "tokens": [int]} → {"prompt": string} (special
//     tokens kept, as transformers' decode default).
// As vLLM (serving_engine's _validate_input skips Tokenize requests), a
// prompt or a chat of max_model_len tokens or more is counted, not refused;
// only text that must tokenize to max_model_len tokens or more by
// Tokenizer::min_token_count is a 400 (check_prompt_length_bound), so the
// work stays bounded.
// Errors are OpenAI error JSON with the field in param.
#pragma once
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/openai_error.h"
#include "server/serving_model.h"

namespace pagoda {

std::variant<nlohmann::json, OpenAIError> tokenize_request(std::string_view body, const ServingModel& model);
std::variant<nlohmann::json, OpenAIError> detokenize_request(std::string_view body, const ServingModel& model);

}  // namespace pagoda
