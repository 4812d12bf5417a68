#include "loadtest/common/process_stats.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace pagoda::loadtest {

FileLimit raise_file_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return {static_cast<uint64_t>(lim.rlim_cur), static_cast<uint64_t>(lim.rlim_max)};
}

std::optional<uint64_t> rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));  // "VmRSS:   1234 kB"
  }
  return std::nullopt;
}

}  // namespace pagoda::loadtest
