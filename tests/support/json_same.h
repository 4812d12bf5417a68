// Exact equality of two nlohmann::json values for the JSON fast path's
// differential checks (tests/unit/json_fast_path_test.cpp and
// tests/fuzz/fuzz_json_fast_path.cpp): the same value and the same type at
// every node. json's own == says 1 == 1u == 1.0; floats compare bitwise,
// so -0.0 and 0.0 differ.
#pragma once
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>

namespace pagoda::test {

inline bool json_same(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !json_same(it.value(), b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_same(a[i], b[i])) return false;
    return true;
  }
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a == b;
}

}  // namespace pagoda::test
