#include "server/openai_error.h"

#include <utility>

namespace pagoda {

const char* error_type_for_status(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 409: return "ConflictError";
    case 413: return "RequestTooLargeError";
    case 422: return "UnprocessableEntityError";
    case 429: return "RateLimitError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

nlohmann::json OpenAIError::to_json() const {
  nlohmann::json err = {{"message", message},
                        {"type", type.empty() ? error_type_for_status(status) : type},
                        {"param", nullptr},
                        {"code", status}};
  if (!param.empty()) err["param"] = param;
  return {{"error", std::move(err)}};
}

OpenAIError make_error(int status, std::string message, std::string param) {
  return OpenAIError{status, error_type_for_status(status), std::move(message), std::move(param)};
}
OpenAIError bad_request(std::string message, std::string param) {
  return make_error(400, std::move(message), std::move(param));
}
OpenAIError not_found(std::string message, std::string param) {
  return make_error(404, std::move(message), std::move(param));
}

}  // namespace pagoda
