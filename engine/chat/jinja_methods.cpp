// Python str / dict / list methods for templates (see jinja_methods.h).
#include "engine/chat/jinja_methods.h"

#include <cctype>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"

namespace pagoda::jinja {
namespace {

const char* kPyWhitespace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
// What one part of a split costs once it is a string value in a list.
constexpr size_t kPartBytes = sizeof(std::string) + 64 + sizeof(Value);

const std::string* opt_str(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) throw ChatTemplateError("expected a string argument, got " + v->type_name());
  return &v->str();
}

int64_t opt_int(const CallArgs& a, size_t i, const char* name, int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int()) throw ChatTemplateError("expected an integer argument, got " + v->type_name());
  return v->as_int();
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw ChatTemplateError("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value str_method(const Value& obj, const std::string& name) {
  const std::string s = obj.str();
  Function f;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    f = [s, l, r](const CallArgs& a) { return Value(py_strip(s, opt_str(a, 0, "chars"), l, r)); };
  } else if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    f = [s, prefix](const CallArgs& a) {
      if (a.pos.empty()) throw ChatTemplateError("startswith/endswith takes at least 1 argument");
      return Value(affix_match(s, a.pos[0], prefix));
    };
  } else if (name == "split") {
    f = [s](const CallArgs& a) {
      List out;
      for (auto& p : py_split(s, opt_str(a, 0, "sep"), opt_int(a, 1, "maxsplit", -1))) out.emplace_back(p);
      return Value::list(std::move(out));
    };
  } else if (name == "splitlines") {
    f = [s](const CallArgs&) {
      List out;
      size_t b = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.emplace_back(s.substr(b, i - b));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          b = i + 1;
        }
      }
      if (b < s.size()) out.emplace_back(s.substr(b));
      return Value::list(std::move(out));
    };
  } else if (name == "replace") {
    f = [s](const CallArgs& a) {
      const std::string* from = opt_str(a, 0, "old");
      const std::string* to = opt_str(a, 1, "new");
      if (!from || !to) throw ChatTemplateError("replace expected at least 2 arguments");
      return Value(py_replace(s, *from, *to, opt_int(a, 2, "count", -1)));
    };
  } else if (name == "upper") {
    f = [s](const CallArgs&) { return Value(utf8_upper(s)); };
  } else if (name == "lower") {
    f = [s](const CallArgs&) { return Value(utf8_lower(s)); };
  } else if (name == "title") {
    f = [s](const CallArgs&) { return Value(utf8_title(s)); };
  } else if (name == "capitalize") {
    f = [s](const CallArgs&) { return Value(utf8_capitalize(s)); };
  } else if (name == "find" || name == "count") {
    bool find = name == "find";
    f = [s, find](const CallArgs& a) {
      const std::string* sub = opt_str(a, 0, "sub");
      if (!sub) throw ChatTemplateError(std::string(find ? "find" : "count") + " expected a string");
      if (find) {
        size_t p = TextFinder(*sub).find(s);
        return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, p))));
      }
      if (sub->empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      const TextFinder finder(*sub);
      for (size_t p = finder.find(s); p != std::string::npos; p = finder.find(s, p + sub->size()))
        ++n;
      return Value(n);
    };
  } else if (name == "join") {
    f = [s](const CallArgs& a) {
      if (a.pos.empty() || !a.pos[0].is_list()) throw ChatTemplateError("join expects a list of strings");
      size_t total = 0;
      for (const Value& v : a.pos[0].items())
        total += (v.is_string() ? v.str().size() : 0) + s.size();
      check_room(total);
      std::string out;
      out.reserve(total);
      for (size_t i = 0; i < a.pos[0].items().size(); ++i) {
        const Value& v = a.pos[0].items()[i];
        if (!v.is_string())
          throw ChatTemplateError("sequence item " + std::to_string(i) + ": expected str instance, " +
                                  v.type_name() + " found");
        if (i) out.append(s);
        out.append(v.str());
        check_room(out.size());
      }
      return Value(std::move(out));
    };
  } else {
    return Value();
  }
  return Value::callable(std::move(f), name);
}

Value unsafe(const Value& obj, const std::string& name) {
  std::string type = obj.type_name();
  return Value::callable(
      [name, type](const CallArgs&) -> Value {
        throw ChatTemplateError("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
      },
      name);
}

Value dict_method(const Value& obj, const std::string& name) {
  Function f;
  if (name == "items") {
    f = [obj](const CallArgs&) {
      List out;
      for (const auto& [k, v] : obj.entries()) out.push_back(Value::list({Value(k), v}));
      return Value::list(std::move(out));
    };
  } else if (name == "keys") {
    f = [obj](const CallArgs&) {
      List out;
      for (const auto& [k, _] : obj.entries()) out.emplace_back(k);
      return Value::list(std::move(out));
    };
  } else if (name == "values") {
    f = [obj](const CallArgs&) {
      List out;
      for (const auto& [_, v] : obj.entries()) out.push_back(v);
      return Value::list(std::move(out));
    };
  } else if (name == "get") {
    f = [obj](const CallArgs& a) {
      if (a.pos.empty()) throw ChatTemplateError("get expected at least 1 argument, got 0");
      if (a.pos[0].is_string())
        if (Value* v = obj.find(a.pos[0].str())) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    };
  } else if (name == "copy") {
    f = [obj](const CallArgs&) { return Value::dict(obj.entries()); };
  } else if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear") {
    return unsafe(obj, name);
  } else {
    return Value();
  }
  return Value::callable(std::move(f), name);
}

Value list_method(const Value& obj, const std::string& name) {
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort" || name == "clear")
    return unsafe(obj, name);
  if (name == "index" || name == "count") {
    bool index = name == "index";
    return Value::callable(
        [obj, index](const CallArgs& a) {
          if (a.pos.empty()) throw ChatTemplateError("expected 1 argument");
          int64_t n = 0;
          for (size_t i = 0; i < obj.items().size(); ++i) {
            if (!equals(obj.items()[i], a.pos[0])) continue;
            if (index) return Value(static_cast<int64_t>(i));
            ++n;
          }
          if (index) throw ChatTemplateError(a.pos[0].repr() + " is not in list");
          return Value(n);
        },
        name);
  }
  return Value();
}

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return str_method(obj, name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return Value();
}

TextFinder::TextFinder(const std::string& needle) : needle_(needle) {
  if (needle.size() < 16) return;
  border_.assign(needle.size(), 0);
  for (size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = border_[k - 1];
    if (needle[i] == needle[k]) ++k;
    border_[i] = k;
  }
  tick(1 + needle.size() / 4096);
}

size_t TextFinder::find(const std::string& text, size_t from) const {
  if (from > text.size() || needle_.size() > text.size() - from) return std::string::npos;
  if (border_.empty()) {
    const size_t p = text.find(needle_, from);
    tick(1 + ((p == std::string::npos ? text.size() : p) - from) / 4096);  // what was scanned
    return p;
  }
  const size_t m = needle_.size();
  size_t k = 0;
  for (size_t i = from; i < text.size(); ++i) {
    if (((i - from) & 0xFFFF) == 0xFFFF) tick(16);
    while (k > 0 && text[i] != needle_[k]) k = border_[k - 1];
    if (text[i] == needle_[k]) ++k;
    if (k == m) return i + 1 - m;
  }
  return std::string::npos;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  const std::string set = chars ? *chars : std::string(kPyWhitespace);
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && set.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw ChatTemplateError("empty separator");
    size_t b = 0;
    const TextFinder finder(*sep);
    for (size_t p = finder.find(s);
         p != std::string::npos && (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit);
         p = finder.find(s, b)) {
      check_room(out.size() * kPartBytes + p);
      out.push_back(s.substr(b, p - b));
      b = p + sep->size();
    }
    out.push_back(s.substr(b));
    return out;
  }
  const std::string ws(kPyWhitespace);
  size_t i = 0;
  while (true) {
    while (i < s.size() && ws.find(s[i]) != std::string::npos) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = s.size();
      while (e > i && ws.find(s[e - 1]) != std::string::npos) --e;
      out.push_back(s.substr(i, e - i));
      break;
    }
    size_t b = i;
    while (i < s.size() && ws.find(s[i]) == std::string::npos) ++i;
    check_room(out.size() * kPartBytes + i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between characters (and at both ends).
    std::string out;
    int64_t n = 0;
    auto chars = utf8_chars(s);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < chars.size()) out += chars[i];
      check_room(out.size());
    }
    return out;
  }
  // The result's size first, so an oversized one fails before it is built.
  int64_t matches = 0;
  const TextFinder finder(from);
  for (size_t p = finder.find(s); p != std::string::npos && (count < 0 || matches < count);
       p = finder.find(s, p + from.size()))
    ++matches;
  const size_t total = s.size() - static_cast<size_t>(matches) * from.size() +
                       static_cast<size_t>(matches) * to.size();
  check_room(total);
  std::string out;
  out.reserve(total);
  size_t b = 0;
  int64_t n = 0;
  for (size_t p = finder.find(s); p != std::string::npos && (count < 0 || n < count);
       p = finder.find(s, b), ++n) {
    out.append(s, b, p - b).append(to);
    check_room(out.size());
    b = p + from.size();
  }
  out.append(s, b);
  return out;
}

}  // namespace pagoda::jinja
