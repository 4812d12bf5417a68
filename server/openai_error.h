// OpenAIError: an HTTP error status plus OpenAI's error body
//   {"error": {"message": ..., "type": ..., "param": ..., "code": <status>}}
// as vLLM's ErrorResponse serves it (vllm/entrypoints/openai/protocol.py);
// `type` is the name the OpenAI Python client raises for the status
// (BadRequestError for 400, NotFoundError for 404, ...).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda {

struct OpenAIError {
  int status = 400;      // HTTP status code
  std::string type;      // "BadRequestError", "NotFoundError", ...
  std::string message;   // human-readable; names the problem and the value
  std::string param;     // the offending request field ("" → null)

  nlohmann::json to_json() const;
  std::string body() const { return to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
};

// The OpenAI client's error class name for an HTTP status.
const char* error_type_for_status(int status);

OpenAIError bad_request(std::string message, std::string param = "");
OpenAIError not_found(std::string message, std::string param = "");
OpenAIError make_error(int status, std::string message, std::string param = "");

}  // namespace pagoda
