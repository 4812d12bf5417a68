// The few things the load-test tools read from a Prometheus text exposition
// (format 0.0.4, what `pagoda serve` answers on GET /metrics).
#pragma once
#include <map>
#include <optional>
#include <string>

namespace pagoda::loadtest {

// Sample name (labels stripped) → the sum of its samples' values over all
// label sets. Comment lines are skipped; malformed lines are ignored.
std::map<std::string, double> sum_samples_by_name(const std::string& text);

// The value for `name` in such a map, or nullopt when absent.
std::optional<double> sample(const std::map<std::string, double>& samples, const std::string& name);

}  // namespace pagoda::loadtest
