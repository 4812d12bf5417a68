// Starts `pagoda serve` for a load test and stops it: the binary is exec'd
// with "--host 127.0.0.1 --port 0" added, its stdout and stderr go to a log
// file, and the port is read from its "Pagoda listening on http://HOST:PORT"
// line (waited for with poll(2), bounded by a deadline).
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace pagoda::loadtest {

class ServerProcess {
 public:
  // binary: the `pagoda` executable; args: what follows `serve`; log_path:
  // where its output is appended ("" → discarded). Throws std::runtime_error
  // when it exits or stays silent for startup_timeout.
  ServerProcess(const std::string& binary, const std::vector<std::string>& args,
                const std::string& log_path, std::chrono::seconds startup_timeout);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  // True while the process has not exited (waitpid WNOHANG).
  bool alive();
  // SIGTERM, then waits up to `bound` (SIGKILL after it). Returns the wait
  // status, and sets *within_bound to whether it exited by itself in time.
  int stop(std::chrono::seconds bound, bool* within_bound = nullptr);

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  int out_fd_ = -1;
  uint16_t port_ = 0;
  std::thread drain_;
};

}  // namespace pagoda::loadtest
