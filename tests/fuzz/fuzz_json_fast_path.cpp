// libFuzzer target: parse_json_fast_path (server/json_fast_path.h), the
// fast path of every request body and /v1/ws message, against nlohmann's
// parser that parse_strict_json falls back to. Invariants: no crash or
// sanitizer report; whatever the fast path accepts, nlohmann accepts with
// the same value and the same number types at every node.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "server/json_fast_path.h"
#include "server/strict_json.h"
#include "tests/support/json_same.h"

using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto fast = pagoda::parse_json_fast_path(text, pagoda::kMaxJsonDepth);
  if (!fast) return 0;
  const json ref = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (ref.is_discarded() || !pagoda::test::json_same(*fast, ref)) std::abort();
  return 0;
}
