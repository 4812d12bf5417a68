// libFuzzer target: the request bodies of every JSON endpoint, through the
// parsers the router calls. The first byte picks the endpoint, the rest is
// the body. Invariants: no crash or sanitizer report, and a rejected body is
// a 4xx OpenAI error (a parse failure answering 5xx is a bug: issue 12).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "server/openai_request.h"
#include "server/tokenize_endpoints.h"
#include "tests/fuzz/fuzz_model.h"

namespace {

void check_error(const pagoda::OpenAIError& e) {
  if (e.status < 400 || e.status >= 500) std::abort();
  (void)e.body();
}

template <typename T>
void check(const std::variant<T, pagoda::OpenAIError>& r) {
  if (auto* e = std::get_if<pagoda::OpenAIError>(&r)) check_error(*e);
}

}  // namespace

// The model (tokenizer, template) is loaded before fuzzing starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pagoda::fuzz::stories_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const pagoda::ServingModel& model = pagoda::fuzz::stories_model();
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      check(pagoda::parse_completion_request(body, model));
      break;
    case 1:
      check(pagoda::parse_chat_request(body, model));
      break;
    case 2:
      check(pagoda::parse_generate_request(body, model));
      break;
    case 3:
      check(pagoda::tokenize_request(body, model));
      break;
    default:
      check(pagoda::detokenize_request(body, model));
      break;
  }
  return 0;
}
