// Python methods of str, dict and list that chat templates call
// (message.content.strip(), tool.items(), ...), as bound callables, and the
// string helpers the filters share. The mutating methods (list.append,
// dict.update, ...) raise SecurityError's message, as under Jinja2's
// ImmutableSandboxedEnvironment, which transformers uses.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/chat/jinja_unicode.h"
#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {

// obj.name as a bound method; Undefined when obj's type has no such method.
Value bound_method(const Value& obj, const std::string& name);

// Substring search in time linear in the text and the needle whatever
// they hold (std::string::find is O(text x needle) on "aaa...a" /
// "a...ab": a 60-byte template took seconds; libstdc++'s
// boyer_moore_searcher builds its tables in O(needle^2) for "aaa...a", an
// 8 MB needle hours): Knuth-Morris-Pratt (Knuth, Morris, Pratt, "Fast
// pattern matching in strings", 1977) for needles of 16 bytes or more,
// std::string::find below that (at most 16 compares a byte). Work counts
// toward the render's time check (tick).
class TextFinder {
 public:
  explicit TextFinder(const std::string& needle);
  // The first match at or after `from`, or std::string::npos.
  size_t find(const std::string& text, size_t from = 0) const;

 private:
  const std::string& needle_;
  std::vector<size_t> border_;  // KMP: longest proper border of needle[0..i]; empty if short
};

// Python str.strip / lstrip / rstrip; chars == nullptr strips whitespace.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
// Python str.split(sep, maxsplit); sep == nullptr splits on whitespace runs.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit);
// Python str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);

}  // namespace pagoda::jinja
