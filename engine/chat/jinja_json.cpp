// Value::to_json: Python's json.dumps (Lib/json/encoder.py) for the values
// templates hold, as transformers' tojson filter calls it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {
namespace {

void append_u_escape(std::string& out, uint32_t unit) {
  char b[16];  // "\\u" + 4 hex digits + NUL; unit is a UTF-16 code unit (<= 0xFFFF)
  std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(unit & 0xFFFFu));
  out += b;
}

// Next code point of UTF-8 `s` at i (advancing i); invalid bytes as U+FFFD.
uint32_t next_code_point(const std::string& s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
  if (n < 0 || i + static_cast<size_t>(n) >= s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = n == 0 ? c : (c & (0x3F >> n));
  for (int k = 1; k <= n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
  i += static_cast<size_t>(n) + 1;
  return cp;
}

void dump(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  tick();
  const std::string item_sep = o.has_separators ? o.item_separator : (o.has_indent ? "," : ", ");
  const std::string key_sep = o.has_separators ? o.key_separator : ": ";
  auto newline = [&](int d) {
    if (!o.has_indent) return;
    out += '\n';
    check_room(out.size() + static_cast<size_t>(d) * o.indent.size());
    for (int k = 0; k < d; ++k) out += o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += py_float_repr(d);
      return;
    }
    case Value::Kind::String: out += json_quote(v.str(), o.ensure_ascii); return;
    case Value::Kind::List: {
      const List& l = v.items();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump(l[i], o, depth + 1, out);
        check_room(out.size());
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      Dict d = v.entries();
      if (d.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(d.begin(), d.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < d.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        out += json_quote(d[i].first, o.ensure_ascii);
        out += key_sep;
        dump(d[i].second, o, depth + 1, out);
        check_room(out.size());
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw ChatTemplateError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string json_quote(const std::string& s, bool ensure_ascii) {
  // Python json's ESCAPE / ESCAPE_ASCII tables: '"', '\\' and control
  // characters below 0x20 are escaped; with ensure_ascii, every non-ASCII
  // code point too (as \uXXXX, UTF-16 surrogate pairs above U+FFFF).
  // The escaped size first (controls grow 6x, non-ASCII 3x with
  // ensure_ascii), so an oversized result fails before it is built.
  size_t size = s.size() + 2;
  for (unsigned char c : s)
    size += c < 0x20 ? 5 : (c == '"' || c == '\\') ? 1 : (c >= 0x80 && ensure_ascii) ? 2 : 0;
  check_room(size);
  std::string out = "\"";
  out.reserve(size);
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (!ensure_ascii) {
        out += static_cast<char>(c);
        ++i;
        continue;
      }
      uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        append_u_escape(out, 0xD800 | (cp >> 10));
        append_u_escape(out, 0xDC00 | (cp & 0x3FF));
      } else {
        append_u_escape(out, cp);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) append_u_escape(out, c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string Value::to_json(const JsonOptions& options) const {
  std::string out;
  dump(*this, options, 0, out);
  return out;
}

}  // namespace pagoda::jinja
