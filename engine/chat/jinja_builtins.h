// Jinja2 builtins used by the interpreter: filters ("List of Builtin
// Filters"), tests ("List of Builtin Tests"), operators on values, attribute
// and item access (Environment.getattr / getitem), the Python str / dict /
// list methods templates call, and globals ("List of Global Functions").
// Every function throws ChatTemplateError with Jinja2's / Python's message
// where those raise.
#pragma once
#include <string>

#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {

// `value | name(args)`; throws "No filter named 'name'." for unknown names.
Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
// `value is name(args)`; throws "No test named 'name'." for unknown names.
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

// obj.name: a dict key, namespace attribute or bound method, else Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: item, falling back to get_attr for string keys, else Undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings (null pointers = omitted).
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// Binary operators + - * / // % ** ~ and unary -, with Python semantics.
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& a);
// `item in container`.
bool contains(const Value& container, const Value& item);

// The builtin globals: range, namespace, dict, strftime_now.
Dict builtin_globals();

}  // namespace pagoda::jinja
