// libFuzzer target: the chat template interpreter (engine/chat/) on an
// arbitrary template and arbitrary messages, as a request's own
// chat_template is rendered. Input: template source, a NUL byte, then the
// messages as JSON (used when it parses; else a fixed two-message chat) —
// libFuzzer's -dict=chat_template.dict helps it find Jinja syntax.
// Invariants: no crash or sanitizer report; only ChatTemplateError escapes;
// the output stays within the interpreter's output bound (16 MiB); a valid
// UTF-8 template (as every request's is: JSON strings are) renders valid
// UTF-8, which every tokenizer takes (crash-* inputs: "\ud800" and
// "\U00110000" escapes once rendered invalid UTF-8, a 500 for BPE models).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/chat/chat_template.h"
#include "engine/tokenizer/bpe_byte_level.h"

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
    if (pagoda::bpe::is_valid_utf8(source) && !pagoda::bpe::is_valid_utf8(out)) std::abort();
  } catch (const pagoda::ChatTemplateError&) {
  }
  return 0;
}
