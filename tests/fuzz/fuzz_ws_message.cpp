// libFuzzer target: a /v1/ws client text message, parsed as WsSession does
// (parse_ws_message, then parse_ws_generation for chat/completion).
// Invariants: no crash or sanitizer report; errors are 4xx OpenAI errors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "server/ws_protocol.h"
#include "tests/fuzz/fuzz_model.h"

// The model (tokenizer, template) is loaded before fuzzing starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pagoda::fuzz::stories_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pagoda::WsClientMessage;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = pagoda::parse_ws_message(text);
  if (auto* e = std::get_if<pagoda::WsMessageError>(&parsed)) {
    if (e->error.status < 400 || e->error.status >= 500) std::abort();
    (void)pagoda::ws_error_message(e->id, e->error);
    return 0;
  }
  auto& msg = std::get<WsClientMessage>(parsed);
  if (msg.type != WsClientMessage::Type::kChat && msg.type != WsClientMessage::Type::kCompletion)
    return 0;
  auto r = pagoda::parse_ws_generation(msg, pagoda::fuzz::stories_model());
  if (auto* e = std::get_if<pagoda::OpenAIError>(&r)) {
    if (e->status < 400 || e->status >= 500) std::abort();
    (void)pagoda::ws_error_message(msg.id, *e);
  }
  return 0;
}
