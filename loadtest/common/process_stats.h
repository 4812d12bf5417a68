// Process facts the load-test tools need: the open-file limit (raised to the
// hard limit, since every connection is a descriptor) and a process's
// resident set size (/proc/PID/status VmRSS, Linux).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace pagoda::loadtest {

struct FileLimit {
  uint64_t soft = 0;  // after raising
  uint64_t hard = 0;
};

// Raises RLIMIT_NOFILE's soft limit to its hard limit (setrlimit) and returns
// both. Children started afterwards inherit it.
FileLimit raise_file_limit();

// VmRSS of pid in KiB; nullopt when the process is gone or /proc is unreadable.
std::optional<uint64_t> rss_kib(pid_t pid);

}  // namespace pagoda::loadtest
