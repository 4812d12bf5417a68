#include "server/python_json.h"

namespace pagoda {

namespace {

using nlohmann::ordered_json;

void dump_into(const ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += ordered_json(k).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
      out += ": ";
      dump_into(x, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      dump_into(v[i], out);
    }
    out += ']';
  } else {
    out += v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
}

}  // namespace

std::string python_json_dumps(const ordered_json& value) {
  std::string out;
  dump_into(value, out);
  return out;
}

}  // namespace pagoda
