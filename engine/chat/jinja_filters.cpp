// Jinja2 builtin filters ("List of Builtin Filters" in the template designer
// documentation; jinja2/filters.py), with transformers' tojson override:
// json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_interpreter.h"
#include "engine/chat/jinja_methods.h"
#include "engine/core/html_escape.h"

namespace pagoda::jinja {
namespace {

const Value* opt(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v && !v->is_none() ? v : nullptr;
}
bool opt_bool(const CallArgs& a, size_t i, const char* name, bool def) {
  const Value* v = opt(a, i, name);
  return v ? v->truthy() : def;
}
std::string opt_string(const CallArgs& a, size_t i, const char* name, const std::string& def) {
  const Value* v = opt(a, i, name);
  return v ? v->to_string() : def;
}

// jinja2.filters.make_attrgetter: dotted path, integer parts index lists.
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(utf8_lower(v.str())) : v;
}

std::string jinja_title(const std::string& s) {
  // Words begin after runs of whitespace or any of - ( { [ < (jinja2's
  // _word_beginning_split_re); each word is item[0].upper() + item[1:].lower().
  std::string out, word;
  auto flush = [&] {
    out += utf8_capitalize(word);
    word.clear();
  };
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      flush();
      out += c;
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

std::string indent(const std::string& text, const std::string& ind, bool first, bool blank) {
  std::vector<std::string> lines;
  std::string s = text + "\n";
  size_t b = 0;
  for (size_t p = s.find('\n'); p != std::string::npos; p = s.find('\n', b)) {
    check_room(lines.size() * (sizeof(std::string) + ind.size()) + b);
    lines.push_back(s.substr(b, p - b));
    b = p + 1;
  }
  std::string rv = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    rv += '\n';
    if (blank || !lines[i].empty()) rv += ind;
    rv += lines[i];
  }
  if (first) rv.insert(0, ind);
  return rv;
}

Value select_like(const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  List out;
  size_t test_pos = by_attr ? 1 : 0;
  std::string attr = by_attr ? opt_string(a, 0, "attribute", "") : "";
  CallArgs targs;
  for (size_t i = test_pos + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
  for (const Value& item : iterate(v)) {
    Value x = by_attr ? attr_path(item, attr) : item;
    bool r = a.pos.size() > test_pos ? apply_test(a.pos[test_pos].to_string(), x, targs) : x.truthy();
    if (r == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

int64_t to_int(const Value& v, int64_t def, int64_t base) {
  if (v.is_int()) return v.as_int();
  if (v.kind() == Value::Kind::Float) return static_cast<int64_t>(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.str(), nullptr, true, true);
    char* end = nullptr;
    // Python's int(s, base) takes base 0 or 2..36; another base is its
    // ValueError, which jinja2's int filter answers with int(float(s)).
    if (base == 0 || (base >= 2 && base <= 36)) {
      long long i = std::strtoll(s.c_str(), &end, static_cast<int>(base));
      if (!s.empty() && end && *end == '\0') return i;
    }
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return static_cast<int64_t>(d);
  }
  return def;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "default" || name == "d") {
    bool use_default = v.is_undefined() || (opt_bool(a, 1, "boolean", false) && !v.truthy());
    if (!use_default) return v;
    const Value* d = a.get(0, "default_value");
    return d ? *d : Value("");
  }
  if (name == "safe") return v;
  if (name == "string") return Value(v.to_string());
  if (name == "escape" || name == "e") return Value(html_escape(v.to_string()));
  if (name == "trim") {
    const Value* chars = opt(a, 0, "chars");
    std::string c = chars ? chars->to_string() : "";
    return Value(py_strip(v.to_string(), chars ? &c : nullptr, true, true));
  }
  if (name == "upper") return Value(utf8_upper(v.to_string()));
  if (name == "lower") return Value(utf8_lower(v.to_string()));
  if (name == "capitalize") return Value(utf8_capitalize(v.to_string()));
  if (name == "title") return Value(jinja_title(v.to_string()));
  if (name == "replace") {
    const Value* c = opt(a, 2, "count");
    return Value(py_replace(v.to_string(), opt_string(a, 0, "old", ""), opt_string(a, 1, "new", ""),
                            c ? c->as_int() : -1));
  }
  if (name == "indent") {
    const Value* w = opt(a, 0, "width");
    if (w && !w->is_string()) check_room(static_cast<size_t>(std::max<int64_t>(0, w->as_int())));
    std::string ind = !w ? "    " : w->is_string() ? w->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, w->as_int())), ' ');
    return Value(indent(v.to_string(), ind, opt_bool(a, 1, "first", false), opt_bool(a, 2, "blank", false)));
  }
  if (name == "tojson") {
    // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    JsonOptions o;
    o.ensure_ascii = opt_bool(a, 0, "ensure_ascii", false);
    if (const Value* ind = opt(a, 1, "indent")) {
      o.has_indent = true;
      if (!ind->is_string()) check_room(static_cast<size_t>(std::max<int64_t>(0, ind->as_int())));
      o.indent = ind->is_string() ? ind->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, ind->as_int())), ' ');
    }
    if (const Value* sep = opt(a, 2, "separators")) {
      if (!sep->is_list() || sep->items().size() != 2) throw ChatTemplateError("separators must be a pair of strings");
      o.has_separators = true;
      o.item_separator = sep->items()[0].to_string();
      o.key_separator = sep->items()[1].to_string();
    }
    o.sort_keys = opt_bool(a, 3, "sort_keys", false);
    return Value(v.to_json(o));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(static_cast<int64_t>(utf8_length(v.str())));
    if (v.is_list()) return Value(static_cast<int64_t>(v.items().size()));
    if (v.is_dict() || v.is_namespace()) return Value(static_cast<int64_t>(v.entries().size()));
    if (v.is_undefined()) return Value(int64_t{0});
    throw ChatTemplateError("object of type '" + v.type_name() + "' has no len()");
  }
  if (name == "first" || name == "last") {
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "join") {
    std::string sep = opt_string(a, 0, "d", "");
    const Value* attr = opt(a, 1, "attribute");
    const List items = iterate(v);
    if (!attr) {  // strings' sizes first, so an oversized result fails before it is built
      size_t total = 0;
      for (const Value& item : items)
        total += (item.is_string() ? item.str().size() : 0) + sep.size();
      check_room(total);
    }
    std::string out;
    bool firstitem = true;
    for (const Value& item : items) {
      if (!firstitem) out.append(sep);
      const Value x = attr ? attr_path(item, attr->to_string()) : item;
      if (x.is_string())
        out.append(x.str());
      else
        out.append(x.to_string());
      check_room(out.size());
      firstitem = false;
    }
    return Value(std::move(out));
  }
  if (name == "int") {
    const Value* base = opt(a, 1, "base");
    return Value(to_int(v, opt(a, 0, "default") ? opt(a, 0, "default")->as_int() : 0,
                        base ? base->as_int() : 10));
  }
  if (name == "float") {
    const Value* def = opt(a, 0, "default");
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
      std::string s = py_strip(v.str(), nullptr, true, true);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value(d);
    }
    return Value(def ? def->as_double() : 0.0);
  }
  if (name == "abs") {
    if (!v.is_number()) throw ChatTemplateError("bad operand type for abs(): '" + v.type_name() + "'");
    return v.kind() == Value::Kind::Float ? Value(std::fabs(v.as_double())) : Value(static_cast<int64_t>(std::llabs(v.as_int())));
  }
  if (name == "round") {
    const Value* p = opt(a, 0, "precision");
    std::string method = opt_string(a, 1, "method", "common");
    double scale = std::pow(10.0, p ? static_cast<double>(p->as_int()) : 0.0);
    double x = v.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / scale);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) throw ChatTemplateError("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, x] : v.entries()) out.push_back(Value::list({Value(k), x}));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) throw ChatTemplateError("You can only sort by either \"key\" or \"value\"");
    bool cs = opt_bool(a, 0, "case_sensitive", false);
    std::string by = opt_string(a, 1, "by", "key");
    bool rev = opt_bool(a, 2, "reverse", false);
    int pos = by == "key" ? 0 : by == "value" ? 1 : -1;
    if (pos < 0) throw ChatTemplateError("You can only sort by either \"key\" or \"value\"");
    List out;
    for (const auto& [k, x] : v.entries()) out.push_back(Value::list({Value(k), x}));
    std::stable_sort(out.begin(), out.end(), [&](const Value& l, const Value& r) {
      int c = compare(sort_key(l.items()[static_cast<size_t>(pos)], cs), sort_key(r.items()[static_cast<size_t>(pos)], cs));
      return rev ? c > 0 : c < 0;
    });
    return Value::list(std::move(out));
  }
  if (name == "map") {
    List out;
    const Value* attr = a.get(99, "attribute");
    for (const Value& item : iterate(v)) {
      if (attr) {
        Value x = attr_path(item, attr->to_string());
        const Value* def = a.get(99, "default");
        out.push_back(x.is_undefined() && def ? *def : x);
      } else {
        if (a.pos.empty()) throw ChatTemplateError("map requires a filter argument");
        CallArgs fa;
        fa.pos.assign(a.pos.begin() + 1, a.pos.end());
        fa.kw = a.kw;
        out.push_back(apply_filter(a.pos[0].to_string(), item, fa));
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "select") return select_like(v, a, false, true);
  if (name == "reject") return select_like(v, a, false, false);
  if (name == "selectattr") return select_like(v, a, true, true);
  if (name == "rejectattr") return select_like(v, a, true, false);
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.str());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(out);
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    bool rev = name == "sort" && opt_bool(a, 0, "reverse", false);
    bool cs = opt_bool(a, name == "sort" ? 1 : 0, "case_sensitive", false);
    const Value* attr = opt(a, name == "sort" ? 2 : 1, "attribute");
    List items = iterate(v);
    auto key = [&](const Value& x) { return sort_key(attr ? attr_path(x, attr->to_string()) : x, cs); };
    if (name == "unique") {
      List out, seen;
      for (const Value& x : items) {
        Value k = key(x);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(x);
        }
      }
      return Value::list(std::move(out));
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& l, const Value& r) {
      int c = compare(key(l), key(r));
      return rev ? c > 0 : c < 0;
    });
    if (name == "sort") return Value::list(std::move(items));
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    const Value* attr = opt(a, 0, "attribute");
    const Value* start = opt(a, 1, "start");
    Value total = start ? *start : Value(int64_t{0});
    for (const Value& x : iterate(v)) total = binary_op("+", total, attr ? attr_path(x, attr->to_string()) : x);
    return total;
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(py_split(v.to_string(), nullptr, -1).size()));
  throw ChatTemplateError("No filter named '" + name + "'.");
}

}  // namespace pagoda::jinja
