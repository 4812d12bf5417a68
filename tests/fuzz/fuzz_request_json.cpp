// libFuzzer target: the request bodies of every JSON endpoint, through the
// parsers the router calls. The first byte picks the endpoint (mod 5) and
// with its bit 7 the model (stories260K's SentencePiece or Qwen2's
// byte-level BPE tokenizer); the rest is the body. Invariants: no crash or
// sanitizer report, no exception escapes (the router would answer 500), and
// a rejected body is a 4xx OpenAI error (issue 12).
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
  (void)pagoda::fuzz::qwen2_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Bit 7 of the first byte: Qwen2's BPE tokenizer instead of stories260K's.
  const pagoda::ServingModel& model =
      data[0] & 0x80 ? pagoda::fuzz::qwen2_model() : pagoda::fuzz::stories_model();
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
