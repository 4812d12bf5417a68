// Python object semantics for jinja::Value (see jinja_value.h).
#include "engine/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {
std::string nesting_error() {
  return "lists and dicts nested deeper than " + std::to_string(RenderScope::kMaxNesting) +
         " levels";
}
}  // namespace

const Value* CallArgs::get(size_t index, const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  if (index < pos.size()) return &pos[index];
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t v) : kind_(Kind::Int), i_(v) {}
Value::Value(double v) : kind_(Kind::Float), f_(v) {}
// What one character of a string costs once iterated into a list of string
// values (the std::string, its shared control block, the Value).
constexpr size_t kCharValueBytes = sizeof(std::string) + 64 + sizeof(Value);
// Lists and dicts are charged when they hold at least this many items
// (smaller ones — loop, namespaces, literals — cost a bounded amount per
// statement, which the step and time bounds hold).
constexpr size_t kChargedItems = 16;

Value::Value(std::string s) : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {
  charge(s_->size());
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  for (const Value& item : items) v.nesting_ = std::max(v.nesting_, item.nesting_ + 1);
  if (v.nesting_ > RenderScope::kMaxNesting) throw ChatTemplateError(nesting_error());
  if (items.size() >= kChargedItems) charge(items.size() * sizeof(Value));
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::dict(Dict items) {
  Value v;
  v.kind_ = Kind::Dict;
  for (const auto& [k, item] : items) v.nesting_ = std::max(v.nesting_, item.nesting_ + 1);
  if (v.nesting_ > RenderScope::kMaxNesting) throw ChatTemplateError(nesting_error());
  if (items.size() >= kChargedItems) charge(items.size() * sizeof(Dict::value_type));
  v.dict_ = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::ns(Dict items) {
  // A namespace is mutable, so what it holds is not counted in its nesting
  // (printing and comparing stop at it; RenderScope breaks its cycles).
  Value v = dict(std::move(items));
  v.kind_ = Kind::Namespace;
  v.nesting_ = 0;
  track_namespace(v.dict_);
  return v;
}
Value Value::callable(Function fn, std::string name) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<Function>(std::move(fn));
  v.s_ = std::make_shared<std::string>(std::move(name));
  return v;
}

template <class Json>
static Value value_from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value(j.template get<bool>());
    case Json::value_t::number_integer: return Value(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value(j.template get<double>());
    case Json::value_t::string: return Value(j.template get<std::string>());
    case Json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(value_from_json(e));
      return Value::list(std::move(l));
    }
    case Json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.emplace_back(k, value_from_json(e));
      return Value::dict(std::move(d));
    }
    default: throw ChatTemplateError("unsupported JSON value in template variables");
  }
}

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

Value* Value::find(const std::string& key) const {
  if (!dict_) return nullptr;
  tick(1 + dict_->size() / 64);  // a linear scan (a message may carry 200,000 keys)
  for (auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  if (kind_ == Kind::Dict) {
    // Dicts are set only while being built (literals, dict(), loop), so
    // their nesting is kept here; a namespace's contents are not counted.
    nesting_ = std::max(nesting_, v.nesting_ + 1);
    if (nesting_ > RenderScope::kMaxNesting) throw ChatTemplateError(nesting_error());
  }
  if (dict_->size() >= kChargedItems) charge(sizeof(Dict::value_type));
  if (Value* p = find(key)) *p = std::move(v);
  else dict_->emplace_back(key, std::move(v));
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->empty();
    default: return true;
  }
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's repr layout: fixed notation for
  // decimal exponents in [-4, 16), scientific otherwise (float_repr_style 'short').
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out.assign(digits, 0, static_cast<size_t>(exp + 1));
      out += '.';
      out.append(digits, static_cast<size_t>(exp + 1), std::string::npos);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  if (neg) out.insert(0, 1, '-');
  return out;
}

// Python's repr of a str: quoted with ' unless the text has ' and no ";
// backslash, the quote, \t \n \r escaped; every other character
// str.isprintable() refuses as \xhh, \uhhhh or \Uhhhhhhhh (by its code
// point), the rest as it is.
static std::string py_str_repr(const std::string& s) {
  bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  auto plain = [q](unsigned char c) {
    return c >= 0x20 && c < 0x7f && c != '\\' && c != static_cast<unsigned char>(q);
  };
  std::string out(1, q);
  out.reserve(s.size() + 2);
  size_t i = 0;
  while (i < s.size()) {
    // Runs of printable ASCII, appended at once.
    size_t j = i;
    while (j < s.size() && plain(static_cast<unsigned char>(s[j]))) ++j;
    out.append(s, i, j - i);
    if (j == s.size()) break;
    i = j;
    const auto c = static_cast<unsigned char>(s[i]);
    char b[16];
    if (c < 0x80) {
      ++i;
      if (c == '\\')
        out += "\\\\";
      else if (c == static_cast<unsigned char>(q))
        out += std::string("\\") + q;
      else if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else if (c == '\t')
        out += "\\t";
      else {
        std::snprintf(b, sizeof b, "\\x%02x", c);
        out += b;
      }
      continue;
    }
    bool valid = true;
    const size_t start = i;
    const uint32_t cp = utf8_decode(s, i, valid);
    if (!valid || py_isprintable(cp)) {
      out.append(s, start, i - start);  // (an invalid byte: copied as it is)
      continue;
    }
    if (cp <= 0xff)
      std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(cp));
    else if (cp <= 0xffff)
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
    else
      std::snprintf(b, sizeof b, "\\U%08x", static_cast<unsigned>(cp));
    out += b;
  }
  out += q;
  return out;
}

std::string Value::to_string() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  if (kind_ == Kind::List || kind_ == Kind::Dict) {
    std::string out;
    repr_into(out);
    return out;
  }
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return py_float_repr(f_);
    case Kind::String: return py_str_repr(*s_);
    case Kind::List:
    case Kind::Dict:
      break;  // repr_into
    case Kind::Namespace: return "<Namespace>";
    case Kind::Callable: return "<function " + *s_ + ">";
  }
  return "";
}

// Lists and dicts print into one buffer (a nested value's text is not
// copied into each enclosing one), bounded as it grows.
void Value::repr_into(std::string& out) const {
  tick();
  if (kind_ == Kind::List) {
    out += '[';
    for (size_t i = 0; i < list_->size(); ++i) {
      if (i) out += ", ";
      (*list_)[i].repr_into(out);
      check_room(out.size());
    }
    out += ']';
  } else if (kind_ == Kind::Dict) {
    out += '{';
    for (size_t i = 0; i < dict_->size(); ++i) {
      if (i) out += ", ";
      out += py_str_repr((*dict_)[i].first);
      out += ": ";
      (*dict_)[i].second.repr_into(out);
      check_room(out.size());
    }
    out += '}';
  } else {
    out += repr();
    check_room(out.size());
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  tick(a.is_string() && b.is_string() ? 1 + std::min(a.str().size(), b.str().size()) / 4096 : 1);
  if (a.same_object(b)) return true;  // Python's identity shortcut (see compare)
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* o = b.find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    default: return &a.entries() == &b.entries();
  }
}

int compare(const Value& a, const Value& b) {
  tick(a.is_string() && b.is_string() ? 1 + std::min(a.str().size(), b.str().size()) / 4096 : 1);
  if (a.is_number() && b.is_number()) {
    double x = a.as_double(), y = b.as_double();
    if (!a.is_int() || !b.is_int()) return x < y ? -1 : (x > y ? 1 : 0);
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    if (a.same_object(b)) return 0;
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.items(), &y = b.items();
    // Python compares lists item by item with an identity shortcut
    // (PyObject_RichCompareBool): a list shared at many places (ns.a =
    // [ns.a, ns.a], repeated) is compared once, not once per path.
    if (&x == &y) return 0;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].same_object(y[i])) continue;
      if (int c = compare(x[i], y[i])) return c;
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) throw ChatTemplateError(a.undefined_message());
  if (b.is_undefined()) throw ChatTemplateError(b.undefined_message());
  throw ChatTemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80 || out.empty()) {
      // Each character becomes a string value: bounded before it is built.
      check_room(out.size() * kCharValueBytes);
      out.emplace_back(1, static_cast<char>(c));
    } else {
      out.back() += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace pagoda::jinja
