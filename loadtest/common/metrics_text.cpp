#include "loadtest/common/metrics_text.h"

#include <cstdlib>
#include <sstream>

namespace pagoda::loadtest {

std::map<std::string, double> sum_samples_by_name(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    size_t value_start = line[name_end] == '{' ? line.find("} ", name_end) : name_end;
    if (value_start == std::string::npos) continue;
    value_start = line.find_first_not_of("} ", value_start);
    if (value_start == std::string::npos) continue;
    const char* begin = line.c_str() + value_start;
    char* end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin) continue;
    out[line.substr(0, name_end)] += v;
  }
  return out;
}

std::optional<double> sample(const std::map<std::string, double>& samples,
                             const std::string& name) {
  auto it = samples.find(name);
  if (it == samples.end()) return std::nullopt;
  return it->second;
}

}  // namespace pagoda::loadtest
