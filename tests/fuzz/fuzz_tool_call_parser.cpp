// ToolCallParser (server/tool_call_parser.h) on arbitrary text: the first
// byte picks the parser (even: hermes, odd: llama3_json), the second the
// piece size the text is fed in (1..16 bytes); the rest is the text. The
// text fed whole and fed in pieces must give the same content and the same
// calls (deltas merged by index, withdrawn calls dropped and their text put
// back in the content), and every call's first delta must carry its id and
// name.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace {

using pagoda::ToolCallParser;
using pagoda::ToolParseResult;
using pagoda::ToolParserKind;

struct Merged {
  std::string content;
  std::vector<std::string> names, arguments;
  std::vector<int> indexes;  // names[i]'s call index
  int next = 0;              // the next new call's index
};

void check(bool ok) {
  if (!ok) std::abort();
}

void take(Merged& m, ToolParseResult r) {
  const size_t base = m.content.size();
  m.content += r.content;
  for (const pagoda::ToolCallDelta& d : r.calls) {
    if (d.index == m.next) {
      check(!d.id.empty() && !d.name.empty());
      m.names.push_back(d.name);
      m.arguments.push_back(d.arguments);
      m.indexes.push_back(d.index);
      ++m.next;
    } else {
      check(d.index + 1 == m.next && !m.indexes.empty() && m.indexes.back() == d.index &&
            d.id.empty() && d.name.empty());
      m.arguments.back() += d.arguments;
    }
  }
  // A withdrawn call is dropped (by index: a later call's deltas may come
  // in the same result), its text content.
  size_t inserted = 0;
  for (const pagoda::WithdrawnCall& w : r.withdrawn) {
    const auto at = std::find(m.indexes.begin(), m.indexes.end(), w.index);
    check(at != m.indexes.end() && w.offset <= r.content.size());
    const auto i = at - m.indexes.begin();
    m.names.erase(m.names.begin() + i);
    m.arguments.erase(m.arguments.begin() + i);
    m.indexes.erase(at);
    m.content.insert(base + inserted + w.offset, w.text);
    inserted += w.text.size();
  }
}

Merged run(ToolParserKind kind, std::string_view text, size_t piece) {
  ToolCallParser p(kind, [] { return std::string("id"); });
  Merged m;
  for (size_t i = 0; i < text.size(); i += piece) take(m, p.feed(text.substr(i, piece)));
  take(m, p.finish());
  check(p.called() == !m.names.empty());
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 4096) return 0;
  const ToolParserKind kind = data[0] % 2 ? ToolParserKind::kLlama3Json : ToolParserKind::kHermes;
  const size_t piece = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const Merged whole = run(kind, text, text.size() + 1);
  const Merged split = run(kind, text, piece);
  check(whole.content == split.content);
  check(whole.names == split.names);
  check(whole.arguments == split.arguments);
  return 0;
}
