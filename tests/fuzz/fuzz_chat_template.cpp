// libFuzzer target: the chat template interpreter (engine/chat/) on an
// arbitrary template and arbitrary messages, as a request's own
// chat_template is rendered. Input: template source, a NUL byte, then the
// messages as JSON (used when it parses; else a fixed two-message chat) —
// libFuzzer's -dict=chat_template.dict helps it find Jinja syntax.
// Invariants: no crash or sanitizer report; only ChatTemplateError escapes;
// the output stays within the interpreter's output bound (16 MiB).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string source(in.substr(0, nul));
  nlohmann::json messages = nlohmann::json::parse(
      nul == std::string_view::npos ? std::string_view("") : in.substr(nul + 1), nullptr, false);
  if (messages.is_discarded())
    messages = nlohmann::json::parse(
        R"([{"role":"system","content":"s"},{"role":"user","content":"hi"}])");
  try {
    pagoda::ChatTemplate tmpl(source);
    std::string out =
        tmpl.render(messages, true, "<s>", "</s>", {{"tools", nlohmann::json::array()}});
    if (out.size() > (size_t{16} << 20) + (size_t{1} << 20)) std::abort();
  } catch (const pagoda::ChatTemplateError&) {
  }
  return 0;
}
