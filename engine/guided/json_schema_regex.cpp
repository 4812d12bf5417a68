#include "engine/guided/json_schema_regex.h"

// GCC 12's -Wrestrict false positive on `"literal" + std::string&&`
// (GCC bug 105329) fires on this file's string building at -O3.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "engine/guided/regex_dfa.h"

namespace pagoda::guided {
namespace {

using json = nlohmann::ordered_json;
using Re = std::optional<std::string>;  // nullopt: no document can match (dropped branch)

// One JSON string character: anything but '"', '\' and controls, or a
// two-character escape.
constexpr std::string_view kStringChar = R"((?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]))";
constexpr std::string_view kInteger = "-?(?:0|[1-9][0-9]*)";
constexpr std::string_view kNumber = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";
constexpr size_t kMaxPatternBytes = 1 << 20;
constexpr long long kMaxBound = 100'000'000'000'000'000LL;  // |bounds| clamped here (1e17)

std::string group(const std::string& r) { return "(?:" + r + ")"; }

std::string alternation(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '|';
    out += p;
  }
  return group(out);
}

// Same-length digit strings a <= b (leading zeros allowed): a regex of the
// digit strings between them.
std::string same_length_range(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a.size() == 1) return a == b ? a : fmt::format("[{}-{}]", a, b);
  if (a[0] == b[0]) return a.substr(0, 1) + same_length_range(a.substr(1), b.substr(1));
  const size_t rest = a.size() - 1;
  const std::string zeros(rest, '0'), nines(rest, '9');
  std::vector<std::string> parts;
  char lo_first = a[0], hi_first = b[0];
  if (a.substr(1) != zeros) {
    parts.push_back(a.substr(0, 1) + same_length_range(a.substr(1), nines));
    ++lo_first;
  }
  std::string tail_hi;
  if (b.substr(1) != nines) {
    tail_hi = b.substr(0, 1) + same_length_range(zeros, b.substr(1));
    --hi_first;
  }
  if (lo_first <= hi_first) {
    std::string first = lo_first == hi_first ? std::string(1, lo_first)
                                             : fmt::format("[{}-{}]", lo_first, hi_first);
    parts.push_back(first + fmt::format("[0-9]{{{}}}", rest));
  }
  if (!tail_hi.empty()) parts.push_back(tail_hi);
  return parts.size() == 1 ? parts[0] : alternation(parts);
}

std::string nonneg_range(unsigned long long lo, unsigned long long hi) {
  std::vector<std::string> parts;
  unsigned long long start = lo;
  while (start <= hi) {
    const std::string s = std::to_string(start);
    unsigned long long top = 9;
    for (size_t i = 1; i < s.size(); ++i) top = top * 10 + 9;
    const unsigned long long end = std::min(hi, top);
    parts.push_back(same_length_range(s, std::to_string(end)));
    if (end == hi) break;
    start = end + 1;
  }
  return parts.size() == 1 ? parts[0] : alternation(parts);
}

class Builder {
 public:
  Builder(const json& root, std::string ws, bool no_additional)
      : root_(root), ws_(std::move(ws)), no_additional_(no_additional) {}

  std::string top() {
    Re r = build(root_, 0, "#");
    if (!r)
      throw SchemaError(
          "the JSON schema can be satisfied by no document (within the $ref depth bound)");
    return *r;
  }

  std::string any_value(int depth) const {
    std::vector<std::string> parts = {string_re(0, -1), std::string(kNumber), "true", "false",
                                      "null"};
    if (depth > 0) {
      const std::string v = any_value(depth - 1);
      parts.push_back(object_of_any(v));
      parts.push_back("\\[" + ws_ + group(v + group(ws_ + "," + ws_ + v) + "*") + "?" + ws_ +
                      "\\]");
    }
    return alternation(parts);
  }

  std::string object_of_any(const std::string& value) const {
    const std::string member = string_re(0, -1) + ws_ + ":" + ws_ + value;
    return "\\{" + ws_ + group(member + group(ws_ + "," + ws_ + member) + "*") + "?" + ws_ + "\\}";
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw SchemaError(fmt::format("invalid or unsupported JSON schema at {}: {}", path, what));
  }

  std::string string_re(int min_len, int max_len) const {
    if (max_len < 0)
      return "\"" + std::string(kStringChar) + fmt::format("{{{},}}", min_len) + "\"";
    return "\"" + std::string(kStringChar) + fmt::format("{{{},{}}}", min_len, max_len) + "\"";
  }

  static std::string literal(const json& v) { return regex_escape(v.dump()); }

  const json& resolve(const std::string& ref, const std::string& path) const {
    if (ref == "#") return root_;
    if (!ref.starts_with("#/"))
      fail(path, fmt::format("$ref '{}' is not within the document", ref));
    const json* cur = &root_;
    size_t pos = 2;
    while (pos <= ref.size()) {
      size_t end = ref.find('/', pos);
      if (end == std::string::npos) end = ref.size();
      std::string key;  // JSON pointer unescaping: ~1 is '/', ~0 is '~'
      for (size_t i = pos; i < end; ++i) {
        if (ref[i] == '~' && i + 1 < end && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
          key.push_back(ref[i + 1] == '1' ? '/' : '~');
          ++i;
        } else {
          key.push_back(ref[i]);
        }
      }
      if (!cur->is_object() || !cur->contains(key))
        fail(path, fmt::format("$ref '{}' does not resolve", ref));
      cur = &(*cur)[key];
      pos = end + 1;
    }
    return *cur;
  }

  static long long clamp_bound(double v) {
    return static_cast<long long>(
        std::clamp(v, -static_cast<double>(kMaxBound), static_cast<double>(kMaxBound)));
  }

  // Integer bounds of a schema: [lo, hi] (either may be absent).
  void int_bounds(const json& s, const std::string& path, std::optional<long long>& lo,
                  std::optional<long long>& hi) const {
    auto num = [&](const char* k) -> std::optional<double> {
      if (!s.contains(k)) return std::nullopt;
      const json& v = s[k];
      if (v.is_boolean())
        fail(path, fmt::format("'{}' as a boolean (draft 4) is not supported", k));
      if (!v.is_number()) fail(path, fmt::format("'{}' must be a number", k));
      return v.get<double>();
    };
    if (auto v = num("minimum")) lo = clamp_bound(std::ceil(*v));
    if (auto v = num("exclusiveMinimum")) {
      long long x = clamp_bound(std::floor(*v)) + 1;
      lo = lo ? std::max(*lo, x) : x;
    }
    if (auto v = num("maximum")) hi = clamp_bound(std::floor(*v));
    if (auto v = num("exclusiveMaximum")) {
      long long x = clamp_bound(std::ceil(*v)) - 1;
      hi = hi ? std::min(*hi, x) : x;
    }
  }

  Re integer_re(const json& s, const std::string& path) const {
    std::optional<long long> lo, hi;
    int_bounds(s, path, lo, hi);
    if (lo && hi) {
      if (*lo > *hi) return std::nullopt;
      return integer_range_regex(*lo, *hi);
    }
    if (lo) {  // x >= lo
      if (*lo == 0) return std::string("(?:0|[1-9][0-9]*)");
      if (*lo < 0) return alternation({integer_range_regex(*lo, -1), "0", "[1-9][0-9]*"});
      const std::string s_lo = std::to_string(*lo);
      return alternation({nonneg_range(static_cast<unsigned long long>(*lo),
                                       std::stoull(std::string(s_lo.size(), '9'))),
                          fmt::format("[1-9][0-9]{{{},}}", s_lo.size())});
    }
    if (hi) {  // x <= hi
      if (*hi >= 0) return alternation({integer_range_regex(0, *hi), "-[1-9][0-9]*"});
      const std::string s_hi = std::to_string(-*hi);
      return fmt::format("-{}",
                         alternation({nonneg_range(static_cast<unsigned long long>(-*hi),
                                                   std::stoull(std::string(s_hi.size(), '9'))),
                                      fmt::format("[1-9][0-9]{{{},}}", s_hi.size())}));
    }
    return std::string(kInteger);
  }

  Re number_re(const json& s, const std::string& path) const {
    if (!s.contains("minimum") && !s.contains("maximum") && !s.contains("exclusiveMinimum") &&
        !s.contains("exclusiveMaximum"))
      return std::string(kNumber);
    std::optional<long long> lo, hi;
    int_bounds(s, path, lo, hi);
    // Integers in the bounds, plus a fraction on integer parts at least one
    // away from both bounds (x.f then stays strictly inside).
    std::vector<std::string> parts;
    const long long ilo = lo.value_or(-kMaxBound), ihi = hi.value_or(kMaxBound);
    if (ilo > ihi) return std::nullopt;
    Re ints = lo && hi ? Re(integer_range_regex(ilo, ihi)) : integer_re(s, path);
    parts.push_back(*ints + "(?:\\.0{1,3})?");
    const long long flo = std::max(ilo + 1, 0LL),
                    fhi = ihi - 1;  // fractions on non-negative parts only
    if (flo <= fhi) parts.push_back(integer_range_regex(flo, fhi) + "\\.[0-9]{1,6}");
    const long long nlo = ilo + 1,
                    nhi = std::min(ihi - 1, -1LL);  // negative parts: -k.f in (-(k+1), -k)
    if (nlo <= nhi) parts.push_back(integer_range_regex(nlo, nhi) + "\\.[0-9]{1,6}");
    return alternation(parts);
  }

  Re string_schema(const json& s, const std::string& path) const {
    auto get_len = [&](const char* k, int def) {
      if (!s.contains(k)) return def;
      if (!s[k].is_number_integer() || s[k].get<long long>() < 0)
        fail(path, fmt::format("'{}' must be a non-negative integer", k));
      long long v = s[k].get<long long>();
      if (v > kMaxRepeat) fail(path, fmt::format("'{}' above {} is not supported", k, kMaxRepeat));
      return static_cast<int>(v);
    };
    const int min_len = get_len("minLength", 0), max_len = get_len("maxLength", -1);
    if (max_len >= 0 && max_len < min_len) return std::nullopt;
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (has_len) fail(path, "'pattern' together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
      std::string p = s["pattern"].get<std::string>();
      const bool anchored = p.starts_with("^") && p.ends_with("$") && !p.ends_with("\\$");
      std::string inner = anchored ? p.substr(1, p.size() - 2)
                                   : group(std::string(kStringChar)) + "*" + group(p) +
                                         group(std::string(kStringChar)) + "*";
      ByteDfa d;
      try {
        d = ByteDfa::compile(anchored ? inner : p);
      } catch (const RegexError& e) {
        fail(path, fmt::format("'pattern': {}", e.what()));
      }
      for (int b = 0; b < 0x20; ++b)
        if (d.uses_byte(static_cast<uint8_t>(b)))
          fail(path,
               "'pattern' may match control characters (JSON needs them escaped): not supported");
      if (d.uses_byte('"') || d.uses_byte('\\'))
        fail(path, "'pattern' may match '\"' or '\\' (JSON needs them escaped): not supported");
      return "\"" + group(inner) + "\"";
    }
    if (s.contains("format")) {
      if (has_len) fail(path, "'format' together with minLength/maxLength is not supported");
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      const std::string date = "[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])";
      const std::string time =
          "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]"
          "):[0-5][0-9])";
      if (f == "date") return "\"" + date + "\"";
      if (f == "time") return "\"" + time + "\"";
      if (f == "date-time") return "\"" + date + "T" + time + "\"";
      if (f == "uuid") return "\"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\"";
      fail(path,
           fmt::format("string format '{}' is not supported (date, time, date-time, uuid)", f));
    }
    return string_re(min_len, max_len);
  }

  Re array_schema(const json& s, int depth, const std::string& path) {
    auto get_count = [&](const char* k, int def) {
      if (!s.contains(k)) return def;
      if (!s[k].is_number_integer() || s[k].get<long long>() < 0)
        fail(path, fmt::format("'{}' must be a non-negative integer", k));
      return static_cast<int>(std::min<long long>(s[k].get<long long>(), kMaxRepeat));
    };
    const int min_items = get_count("minItems", 0), max_items = get_count("maxItems", -1);
    if (max_items >= 0 && max_items < min_items) return std::nullopt;
    if (s.contains("uniqueItems") && s["uniqueItems"] == true)
      fail(path, "'uniqueItems' is not supported");
    const std::string sep = ws_ + "," + ws_;
    if (s.contains("prefixItems")) {
      const json& pi = s["prefixItems"];
      if (!pi.is_array()) fail(path, "'prefixItems' must be an array");
      const int n = static_cast<int>(pi.size());
      if (n < min_items || (max_items >= 0 && n > max_items))
        fail(path, "'prefixItems' with minItems/maxItems other than its length is not supported");
      std::string body;
      for (size_t i = 0; i < pi.size(); ++i) {
        Re item = build(pi[i], depth, fmt::format("{}/prefixItems/{}", path, i));
        if (!item) return std::nullopt;
        body += (i ? sep : "") + *item;
      }
      return "\\[" + ws_ + body + ws_ + "\\]";
    }
    std::string item;
    if (!s.contains("items") || s["items"] == true) {
      item = any_value(kAnyJsonDepth - 1);
    } else if (s["items"] == false) {
      if (min_items > 0) return std::nullopt;
      return "\\[" + ws_ + "\\]";
    } else {
      Re r = build(s["items"], depth, path + "/items");
      if (!r) {
        if (min_items > 0) return std::nullopt;
        return "\\[" + ws_ + "\\]";
      }
      item = *r;
    }
    if (max_items == 0) return "\\[" + ws_ + "\\]";
    const std::string more = group(sep + item);
    std::string body;
    if (min_items == 0) {
      body = group(item +
                   (max_items < 0 ? more + "*" : fmt::format("{}{{0,{}}}", more, max_items - 1))) +
             "?";
    } else {
      body =
          item + (max_items < 0 ? fmt::format("{}{{{},}}", more, min_items - 1)
                                : fmt::format("{}{{{},{}}}", more, min_items - 1, max_items - 1));
    }
    return "\\[" + ws_ + body + ws_ + "\\]";
  }

  Re object_schema(const json& s, int depth, const std::string& path) {
    for (const char* k : {"minProperties", "maxProperties", "patternProperties", "propertyNames",
                          "dependentRequired", "dependentSchemas", "unevaluatedProperties"})
      if (s.contains(k)) fail(path, fmt::format("'{}' is not supported", k));
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "'required' must be an array of strings");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "'required' must be an array of strings");
        required.push_back(r.get<std::string>());
      }
    }
    const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) fail(path, "'properties' must be an object");
    // A required property `properties` does not list is an additional one:
    // its value follows additionalProperties, and where those are closed
    // (false, explicitly) no document has it, so none satisfies the schema
    // (a 400 at the top, a dropped branch in anyOf). Closed only by
    // disable_additional_properties (absent additionalProperties, as for
    // tools' parameters), it stays allowed with any value: that option
    // keeps the model from adding keys, not a schema's own required ones.
    for (const auto& r : required) {
      if (props.contains(r)) continue;
      if (ap && *ap == false) return std::nullopt;
      props[r] = ap && ap->is_object() ? *ap : json::object();
    }
    if (props.empty()) {
      const bool closed = (ap && *ap == false) || (!ap && no_additional_);
      if (closed) return "\\{" + ws_ + "\\}";
      std::string value;
      if (!ap || *ap == true) {
        value = any_value(kAnyJsonDepth - 1);
      } else {
        Re v = build(*ap, depth, path + "/additionalProperties");
        if (!v) return "\\{" + ws_ + "\\}";
        value = *v;
      }
      return object_of_any(value);
    }
    struct Prop {
      std::string re;
      bool required;
    };
    std::vector<Prop> list;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
      Re v = build(it.value(), depth, path + "/properties/" + it.key());
      if (!v) {
        if (req) return std::nullopt;
        continue;
      }
      list.push_back({regex_escape(json(it.key()).dump()) + ws_ + ":" + ws_ + *v, req});
    }
    const std::string sep = ws_ + "," + ws_;
    // rest[i]: properties i.. after something was emitted.
    std::vector<std::string> rest(list.size() + 1);
    for (size_t i = list.size(); i-- > 0;) {
      std::string one = group(sep + list[i].re);
      rest[i] = (list[i].required ? one : one + "?") + rest[i + 1];
    }
    std::vector<std::string> firsts;
    bool has_required = false;
    for (size_t k = 0; k < list.size(); ++k) {
      firsts.push_back(list[k].re + rest[k + 1]);
      if (list[k].required) {
        has_required = true;
        break;
      }
    }
    std::string body = firsts.empty() ? "" : alternation(firsts);
    if (!has_required && !body.empty()) body += "?";
    return "\\{" + ws_ + body + ws_ + "\\}";
  }

  Re typed(const json& s, const std::string& type, int depth, const std::string& path) {
    if (type == "string") return string_schema(s, path);
    if (type == "integer") return integer_re(s, path);
    if (type == "number") return number_re(s, path);
    if (type == "boolean") return std::string("(?:true|false)");
    if (type == "null") return std::string("null");
    if (type == "array") return array_schema(s, depth, path);
    if (type == "object") return object_schema(s, depth, path);
    fail(path, fmt::format("unknown type '{}'", type));
  }

  Re alternatives(const json& list, int depth, const std::string& path, const char* key) {
    if (!list.is_array() || list.empty())
      fail(path, fmt::format("'{}' must be a non-empty array", key));
    std::vector<std::string> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      Re r = build(list[i], depth, fmt::format("{}/{}/{}", path, key, i));
      if (r) parts.push_back(*r);
    }
    if (parts.empty()) return std::nullopt;
    return alternation(parts);
  }

  // build_one with a bound on the pattern's size: nested optional
  // properties repeat their sub-patterns, so a deep schema could otherwise
  // grow a pattern exponentially before the automaton limits see it.
  Re build(const json& s, int depth, const std::string& path) {
    Re r = build_one(s, depth, path);
    if (r && r->size() > kMaxPatternBytes)
      fail(path, fmt::format("the schema is too complex (its pattern exceeds {} bytes)",
                             kMaxPatternBytes));
    return r;
  }

  Re build_one(const json& s, int depth, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return std::nullopt;
      return any_value(kAnyJsonDepth);
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    static const std::set<std::string> kKnown = {"type",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "prefixItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "uniqueItems",
                                                 "enum",
                                                 "const",
                                                 "minLength",
                                                 "maxLength",
                                                 "pattern",
                                                 "format",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "$ref",
                                                 "$defs",
                                                 "definitions",
                                                 "title",
                                                 "description",
                                                 "default",
                                                 "examples",
                                                 "$schema",
                                                 "$id",
                                                 "$comment",
                                                 "deprecated",
                                                 "readOnly",
                                                 "writeOnly",
                                                 "minProperties",
                                                 "maxProperties",
                                                 "patternProperties",
                                                 "propertyNames",
                                                 "dependentRequired",
                                                 "dependentSchemas",
                                                 "unevaluatedProperties"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kKnown.count(it.key()))
        fail(path, fmt::format("keyword '{}' is not supported", it.key()));
    for (const char* k : {"not", "if", "then", "else", "contains", "multipleOf"})
      if (s.contains(k)) fail(path, fmt::format("keyword '{}' is not supported", k));
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
      for (auto it = s.begin(); it != s.end(); ++it) {
        static const std::set<std::string> kBeside = {
            "$ref",    "$defs",    "definitions", "title", "description",
            "default", "examples", "$schema",     "$id",   "$comment"};
        if (!kBeside.count(it.key()))
          fail(path, fmt::format("keyword '{}' beside '$ref' is not supported", it.key()));
      }
      if (depth >= kMaxRefDepth) return std::nullopt;
      const std::string ref = s["$ref"].get<std::string>();
      return build(resolve(ref, path), depth + 1, ref);
    }
    if (s.contains("const")) return literal(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        fail(path, "'enum' must be a non-empty array");
      std::vector<std::string> parts;
      for (const auto& v : s["enum"]) parts.push_back(literal(v));
      return alternation(parts);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1)
        fail(path, "'allOf' with more than one schema is not supported");
      return build(s["allOf"][0], depth, path + "/allOf/0");
    }
    if (s.contains("anyOf")) return alternatives(s["anyOf"], depth, path, "anyOf");
    if (s.contains("oneOf")) return alternatives(s["oneOf"], depth, path, "oneOf");
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        return object_schema(s, depth, path);
      if (s.contains("items") || s.contains("prefixItems")) return array_schema(s, depth, path);
      return any_value(kAnyJsonDepth);
    }
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), depth, path);
    if (!t.is_array() || t.empty()) fail(path, "'type' must be a string or a non-empty array");
    std::vector<std::string> parts;
    for (const auto& one : t) {
      if (!one.is_string()) fail(path, "'type' entries must be strings");
      Re r = typed(s, one.get<std::string>(), depth, path);
      if (r) parts.push_back(*r);
    }
    if (parts.empty()) return std::nullopt;
    return alternation(parts);
  }

  const json& root_;
  std::string ws_;
  bool no_additional_;
};

std::string whitespace_or_default(std::string_view ws) {
  std::string w = ws.empty() ? std::string(kDefaultWhitespace) : std::string(ws);
  try {
    (void)ByteDfa::compile(w);
  } catch (const RegexError& e) {
    throw SchemaError(fmt::format("guided_whitespace_pattern: {}", e.what()));
  }
  return group(w);
}

}  // namespace

std::string integer_range_regex(long long lo, long long hi) {
  if (lo > hi) throw SchemaError("integer_range_regex: empty range");
  std::vector<std::string> parts;
  if (lo < 0) {
    const unsigned long long a = hi < 0 ? static_cast<unsigned long long>(-hi) : 1ULL;
    parts.push_back(fmt::format("-{}", nonneg_range(a, static_cast<unsigned long long>(-lo))));
  }
  if (hi >= 0)
    parts.push_back(nonneg_range(static_cast<unsigned long long>(std::max(lo, 0LL)),
                                 static_cast<unsigned long long>(hi)));
  return parts.size() == 1 ? group(parts[0]) : alternation(parts);
}

std::string json_schema_to_regex(std::string_view schema_text, std::string_view whitespace_pattern,
                                 bool disable_additional_properties) {
  json schema = json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) throw SchemaError("the JSON schema is not valid JSON");
  Builder b(schema, whitespace_or_default(whitespace_pattern), disable_additional_properties);
  return b.top();
}

std::string json_object_regex(std::string_view whitespace_pattern) {
  json empty = json::object();
  Builder b(empty, whitespace_or_default(whitespace_pattern), false);
  return b.object_of_any(b.any_value(kAnyJsonDepth));
}

}  // namespace pagoda::guided
