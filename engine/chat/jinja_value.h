// Value: the runtime value of the Jinja2 interpreter, modelled on the Python
// objects Jinja2 manipulates when transformers renders a chat template:
// Undefined (jinja2.Undefined), None, bool, int, float, str, list, dict
// (insertion-ordered, string keys), Namespace (jinja2.utils.Namespace) and
// callables (globals, macros, bound methods).
// Semantics follow Python (truthiness, ==, <, str(), repr()) as described in
// the Jinja2 template designer documentation ("Expressions", "Literals").
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order

// Positional and keyword arguments of a call, filter or test.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument named `name` or at position `index`, else nullptr.
  const Value* get(size_t index, const std::string& name) const;
};

using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = "");
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(double v);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(List items = {});
  static Value dict(Dict items = {});
  static Value ns(Dict items = {});
  static Value callable(Function fn, std::string name);
  // JSON -> Value; objects keep the order of j's keys (sorted for
  // nlohmann::json, insertion order for nlohmann::ordered_json).
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_int() || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *s_; }
  List& items() const { return *list_; }
  Dict& entries() const { return *dict_; }
  const Function& fn() const { return *fn_; }
  const std::string& undefined_message() const {
    static const std::string kNone;
    return s_ ? *s_ : kNone;
  }
  const std::string& callable_name() const { return *s_; }

  // Dict / Namespace lookup; nullptr when absent.
  Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);

  // The same list, dict, namespace or string object (shared storage).
  bool same_object(const Value& o) const {
    return kind_ == o.kind_ && ((list_ && list_ == o.list_) || (dict_ && dict_ == o.dict_) ||
                                (kind_ == Kind::String && s_ == o.s_));
  }
  bool truthy() const;                 // Python bool()
  std::string to_string() const;       // Python str() (Undefined -> "")
  std::string repr() const;            // Python repr()
  void repr_into(std::string& out) const;  // appends repr()
  std::string type_name() const;       // Python type name: 'int', 'str', ...
  // Python json.dumps(value, **options) (see JsonOptions). Throws
  // ChatTemplateError for values JSON cannot hold (Undefined, callables).
  std::string to_json(const struct JsonOptions& options) const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;  // String value or Undefined message
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
  int nesting_ = 0;  // lists and dicts: 1 + the deepest item's (RenderScope::kMaxNesting)
};

// Arguments of Python's json.dumps as transformers' tojson filter passes
// them: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False). No indent: separators (", ", ": "); with an indent:
// (",", ": ") and one line per item, indented by `indent` per level.
struct JsonOptions {
  bool has_indent = false;
  std::string indent;  // the per-level indent string (Python: int -> spaces)
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator, key_separator;
};

bool equals(const Value& a, const Value& b);          // Python ==
int compare(const Value& a, const Value& b);          // Python <, throws on mismatch
std::string py_float_repr(double d);                  // Python repr(float)
std::string json_quote(const std::string& s, bool ensure_ascii = false);  // json.dumps(str)
size_t utf8_length(const std::string& s);             // code points
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace pagoda::jinja
