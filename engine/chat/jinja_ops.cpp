// Operators, attribute/item access and slicing with Python semantics, as
// Jinja2 evaluates them (template designer documentation, "Math",
// "Comparisons", "Other Operators", "Variables": foo.bar tries the attribute
// then the item, foo['bar'] the item then the attribute).
#include <climits>
#include <cmath>
#include <cstdint>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_methods.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void fail_undefined(const Value& v) { throw ChatTemplateError(v.undefined_message()); }

// jinja2.utils.object_type_repr
std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  return v.type_name() + " object";
}

Value missing_attr(const Value& obj, const std::string& name) {
  std::string msg = "'";
  msg += object_type_repr(obj);
  msg += "' has no attribute '";
  msg += name;
  msg += "'";
  return Value::undefined(msg);
}

// Python integers are unbounded; ours are 64-bit and fail instead of wrapping.
[[noreturn]] Value overflow() { throw ChatTemplateError("integer overflow (values are limited to 64 bits)"); }

// Cap on sequence repetition ('ab' * n), where Python would exhaust memory.
constexpr uint64_t kMaxRepeatedSize = uint64_t{1} << 26;

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_namespace()) {
    if (Value* v = obj.find(name)) return *v;
    return missing_attr(obj, name);
  }
  Value m = bound_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    if (Value* v = obj.find(name)) return *v;
  }
  return missing_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && key.is_string()) {
    if (Value* v = obj.find(key.str())) return *v;
    return get_attr(obj, key.str());
  }
  if ((obj.is_list() || obj.is_string()) && key.is_int()) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    } else {
      auto chars = utf8_chars(obj.str());
      int64_t n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(chars[static_cast<size_t>(i)]);
    }
  } else if (key.is_string()) {
    return get_attr(obj, key.str());
  }
  return Value::undefined(object_type_repr(obj) + " has no element " + key.repr());
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_undefined()) fail_undefined(obj);
  List items;
  std::vector<std::string> chars;
  int64_t n;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.items().size());
  } else if (obj.is_string()) {
    chars = utf8_chars(obj.str());
    n = static_cast<int64_t>(chars.size());
  } else {
    throw ChatTemplateError("'" + obj.type_name() + "' object is not subscriptable");
  }
  auto as_index = [](const Value* v) -> const Value* {
    if (v && !v->is_none() && !v->is_int()) throw ChatTemplateError("slice indices must be integers or None");
    return v && !v->is_none() ? v : nullptr;
  };
  start = as_index(start);
  stop = as_index(stop);
  step = as_index(step);
  int64_t st = step ? step->as_int() : 1;
  if (st == 0) throw ChatTemplateError("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value* v, int64_t def) {
    if (!v) return def;
    int64_t i = v->as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<size_t> idx;
  // Stepped without overflow (a step near INT64_MAX ends the slice).
  for (int64_t i = b; st > 0 ? i < e : i > e;) {
    idx.push_back(static_cast<size_t>(i));
    if (st > 0 ? st >= e - i : st <= e - i) break;
    i += st;
  }
  if (obj.is_list()) {
    for (size_t i : idx) items.push_back(obj.items()[i]);
    return Value::list(std::move(items));
  }
  std::string s;
  for (size_t i : idx) s += chars[i];
  return Value(s);
}

Value negate(const Value& a) {
  if (a.is_undefined()) fail_undefined(a);
  if (a.kind() == Value::Kind::Float) return Value(-a.as_double());
  if (a.is_int()) return a.as_int() == INT64_MIN ? overflow() : Value(-a.as_int());
  throw ChatTemplateError("bad operand type for unary -: '" + a.type_name() + "'");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.to_string() + b.to_string());
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    bool fl = !a.is_int() || !b.is_int();
    double x = a.as_double(), y = b.as_double();
    int64_t i = a.as_int(), j = b.as_int();
    int64_t r = 0;
    if (op == "+") return fl ? Value(x + y) : __builtin_add_overflow(i, j, &r) ? overflow() : Value(r);
    if (op == "-") return fl ? Value(x - y) : __builtin_sub_overflow(i, j, &r) ? overflow() : Value(r);
    if (op == "*") return fl ? Value(x * y) : __builtin_mul_overflow(i, j, &r) ? overflow() : Value(r);
    if (op == "/") {
      if (y == 0) throw ChatTemplateError(fl ? "float division by zero" : "division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw ChatTemplateError(fl ? "float divmod()" : "integer division or modulo by zero");
      if (fl) {
        double q = std::floor(x / y);
        return op == "//" ? Value(q) : Value(x - q * y);
      }
      if (i == INT64_MIN && j == -1) overflow();
      int64_t q = py_floordiv(i, j);
      return op == "//" ? Value(q) : Value(i - q * j);
    }
    if (op == "**") {
      if (x == 0 && y < 0) throw ChatTemplateError("0.0 cannot be raised to a negative power");
      if (!fl && j >= 0) {
        // Square-and-multiply: O(log j) steps, so 1 ** 10**12 is instant. A
        // square overflows only when a higher bit of j remains, which then
        // overflows the result too.
        int64_t p = 1, base = i;
        for (int64_t e = j; e > 0;) {
          if ((e & 1) != 0 && __builtin_mul_overflow(p, base, &p)) overflow();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value(p);
      }
      return Value(std::pow(x, y));
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      check_room((a.items().size() + b.items().size()) * sizeof(Value));
      List l = a.items();
      l.insert(l.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(l));
    }
    if (a.is_string() || a.is_list())
      throw ChatTemplateError("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                              a.type_name());
  }
  if (op == "*" && (a.is_int() || b.is_int()) && (a.is_string() || b.is_string() || a.is_list() || b.is_list())) {
    const Value& seq = a.is_int() ? b : a;
    int64_t n = a.is_int() ? a.as_int() : b.as_int();
    size_t unit = seq.is_string() ? seq.str().size() : seq.items().size();
    if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > kMaxRepeatedSize / unit)
      throw ChatTemplateError("repetition result too large");
    if (n > 0) check_room(static_cast<size_t>(n) * (seq.is_string() ? unit : unit * sizeof(Value)));
    if (seq.is_string()) {
      // By doubling: a few large copies rather than n small appends.
      const size_t total = n > 0 ? static_cast<size_t>(n) * unit : 0;
      std::string s;
      s.reserve(total);
      if (total) s = seq.str();
      while (s.size() < total) s.append(s, 0, std::min(s.size(), total - s.size()));
      return Value(std::move(s));
    }
    List l;
    if (n > 0) l.reserve(static_cast<size_t>(n) * unit);
    for (int64_t k = 0; k < n; ++k) l.insert(l.end(), seq.items().begin(), seq.items().end());
    return Value::list(std::move(l));
  }
  throw ChatTemplateError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        throw ChatTemplateError("'in <string>' requires string as left operand, not " + item.type_name());
      return TextFinder(item.str()).find(container.str()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::Dict: return item.is_string() && container.find(item.str()) != nullptr;
    default: throw ChatTemplateError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

}  // namespace pagoda::jinja
