// Jinja2 builtin tests ("List of Builtin Tests" in the template designer
// documentation; jinja2/tests.py), and the builtin globals ("List of Global
// Functions"; range is capped at MAX_RANGE as in jinja2.sandbox).
#include <ctime>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_methods.h"

namespace pagoda::jinja {
namespace {

const Value& arg(const CallArgs& a, const std::string& test) {
  if (a.pos.empty()) throw ChatTemplateError("test '" + test + "' requires an argument");
  return a.pos[0];
}

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::None:
    case Value::Kind::Undefined: return true;
    case Value::Kind::Bool: return a.as_bool() == b.as_bool();
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::String: return equals(a, b);
    case Value::Kind::List: return &a.items() == &b.items();
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return &a.entries() == &b.entries();
    case Value::Kind::Callable: return &a.fn() == &b.fn();
  }
  return false;
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::Int;
  if (name == "float") return v.kind() == K::Float;
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) throw ChatTemplateError("test '" + name + "' requires an integer, got " + v.type_name());
    int64_t r = v.as_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    const Value& d = arg(a, name);
    if (!v.is_int() || !d.is_int() || d.as_int() == 0) throw ChatTemplateError("divisibleby requires non-zero integers");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "lower") return v.is_string() && utf8_lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && utf8_upper(v.str()) == v.str();
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg(a, name));
  if (name == "ne" || name == "!=") return !equals(v, arg(a, name));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg(a, name)) < 0;
  if (name == "le" || name == "<=") return compare(v, arg(a, name)) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg(a, name)) > 0;
  if (name == "ge" || name == ">=") return compare(v, arg(a, name)) >= 0;
  if (name == "in") return contains(arg(a, name), v);
  if (name == "sameas") return same_as(v, arg(a, name));
  throw ChatTemplateError("No test named '" + name + "'.");
}

Dict builtin_globals() {
  Dict g;
  g.emplace_back("range", Value::callable(
                              [](const CallArgs& a) {
                                int64_t start = 0, stop, step = 1;
                                for (const Value& v : a.pos)
                                  if (!v.is_int()) throw ChatTemplateError("range() arguments must be integers");
                                if (a.pos.size() == 1) {
                                  stop = a.pos[0].as_int();
                                } else if (a.pos.size() == 2 || a.pos.size() == 3) {
                                  start = a.pos[0].as_int();
                                  stop = a.pos[1].as_int();
                                  if (a.pos.size() == 3) step = a.pos[2].as_int();
                                } else {
                                  throw ChatTemplateError("range expected 1 to 3 arguments");
                                }
                                if (step == 0) throw ChatTemplateError("range() arg 3 must not be zero");
                                List out;
                                for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                                  if (out.size() >= 100000)
                                    throw ChatTemplateError(
                                        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
                                  out.emplace_back(i);
                                }
                                return Value::list(std::move(out));
                              },
                              "range"));
  g.emplace_back("namespace", Value::callable(
                                  [](const CallArgs& a) {
                                    Value ns = Value::ns();
                                    for (const Value& p : a.pos) {
                                      if (!p.is_dict()) throw ChatTemplateError("namespace() expects a mapping");
                                      for (const auto& [k, v] : p.entries()) ns.set(k, v);
                                    }
                                    for (const auto& [k, v] : a.kw) ns.set(k, v);
                                    return ns;
                                  },
                                  "namespace"));
  g.emplace_back("dict", Value::callable(
                             [](const CallArgs& a) {
                               Value d = Value::dict();
                               for (const auto& [k, v] : a.kw) d.set(k, v);
                               return d;
                             },
                             "dict"));
  // transformers' strftime_now(format): datetime.now().strftime(format).
  g.emplace_back("strftime_now", Value::callable(
                                     [](const CallArgs& a) {
                                       if (a.pos.empty() || !a.pos[0].is_string())
                                         throw ChatTemplateError("strftime_now expects a format string");
                                       std::time_t t = std::time(nullptr);
                                       std::tm tm{};
                                       localtime_r(&t, &tm);
                                       char buf[256];
                                       size_t n = std::strftime(buf, sizeof buf, a.pos[0].str().c_str(), &tm);
                                       return Value(std::string(buf, n));
                                     },
                                     "strftime_now"));
  return g;
}

}  // namespace pagoda::jinja
