// Typed reads of config.json fields with errors that name the file and the
// field: "config <source>: field '<prefix><name>': <what>" (std::runtime_error).
// Used by ModelConfig (model_config.cpp) and quantization_config
// (engine/quant/quant_config.cpp, prefix "quantization_config.").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace pagoda {

struct ConfigReader {
  const nlohmann::json& j;  // the object holding the fields
  const std::string& source;
  const char* prefix = "";  // how `j` is reached from the file's top level

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error("config " + source + ": field '" + prefix + field + "': " + what);
  }
  // Present and not null.
  bool has(const char* f) const { return j.contains(f) && !j[f].is_null(); }
  // An integer; `def` when absent, an error when absent without one.
  int64_t get_int(const char* f, std::optional<int64_t> def) const {
    if (!has(f)) {
      if (def) return *def;
      fail(f, "missing (required)");
    }
    if (!j[f].is_number_integer()) fail(f, "must be an integer, got " + j[f].dump());
    return j[f].get<int64_t>();
  }
  int64_t get_positive(const char* f, std::optional<int64_t> def) const {
    int64_t v = get_int(f, def);
    if (v <= 0) fail(f, "must be positive, got " + std::to_string(v));
    return v;
  }
  double get_double(const char* f, double def) const {
    if (!has(f)) return def;
    if (!j[f].is_number()) fail(f, "must be a number, got " + j[f].dump());
    return j[f].get<double>();
  }
  bool get_bool(const char* f, bool def) const {
    if (!has(f)) return def;
    if (!j[f].is_boolean()) fail(f, "must be true or false, got " + j[f].dump());
    return j[f].get<bool>();
  }
  std::string get_string(const char* f, const std::string& def) const {
    if (!has(f)) return def;
    if (!j[f].is_string()) fail(f, "must be a string, got " + j[f].dump());
    return j[f].get<std::string>();
  }
};

}  // namespace pagoda
