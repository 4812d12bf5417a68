// Starts the real `pagoda serve` binary (PAGODA_BIN) on 127.0.0.1 port 0 and
// waits for its "Pagoda listening on http://HOST:PORT" stdout line (an
// event, not a sleep; bounded by a deadline so a broken binary fails the
// test). Stops it with SIGTERM and reports the exit status, so tests can
// assert a clean shutdown. The environment variable PAGODA_TEST_SERVER_BIN,
// when set, names another pagoda binary to start instead (CI runs these
// tests against the ThreadSanitizer build's server: scripts/test.sh).
#pragma once
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pagoda::testing_http {

// The server binary: $PAGODA_TEST_SERVER_BIN, else this build's PAGODA_BIN.
inline const char* pagoda_server_bin() {
  const char* bin = std::getenv("PAGODA_TEST_SERVER_BIN");
  return bin && *bin ? bin : PAGODA_BIN;
}

class PagodaServer {
 public:
  // args: what follows `pagoda serve`; "--host 127.0.0.1 --port 0" are added.
  explicit PagodaServer(std::vector<std::string> args, int startup_timeout_s = 120) {
    std::vector<std::string> argv_s = {pagoda_server_bin(), "serve",  "--host",
                                       "127.0.0.1",         "--port", "0"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<char*> argv;
      for (auto& s : argv_s) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(argv_s[0].c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    const std::string marker = "Pagoda listening on http://";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(startup_timeout_s);
    std::string out;
    for (;;) {
      size_t nl = out.find('\n');
      while (nl != std::string::npos) {
        std::string line = out.substr(0, nl);
        out.erase(0, nl + 1);
        if (line.rfind(marker, 0) == 0) {
          port_ = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
          listening_line_ = line;
          drain_ = std::thread([fd = fd_] {
            char buf[4096];
            while (::read(fd, buf, sizeof buf) > 0) {
            }
          });
          return;
        }
        stdout_before_ += line + "\n";
        nl = out.find('\n');
      }
      int left_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         deadline - std::chrono::steady_clock::now())
                                         .count());
      pollfd p{fd_, POLLIN, 0};
      if (left_ms <= 0 || ::poll(&p, 1, left_ms) <= 0) {
        stop();
        throw std::runtime_error("pagoda did not print its listening line in time");
      }
      char buf[4096];
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) {
        int status = stop();
        throw std::runtime_error("pagoda exited before listening (status " + std::to_string(status) + ")");
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
  ~PagodaServer() { stop(); }
  PagodaServer(const PagodaServer&) = delete;
  PagodaServer& operator=(const PagodaServer&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }  // the server process (-1 once reaped)
  const std::string& listening_line() const { return listening_line_; }
  // Lines printed to stdout before the listening line (there should be none).
  const std::string& stdout_before() const { return stdout_before_; }

  // SIGTERM, wait; returns the wait status (WIFEXITED/WEXITSTATUS apply), or
  // the first one again when already stopped.
  int stop() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    return wait();
  }
  // Sends sig and returns at once (the server shuts down by itself; wait()
  // reaps it).
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits for the process to exit (without signalling it); returns the wait
  // status, or the first one again when already reaped.
  int wait() {
    if (pid_ > 0) {
      ::waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
  uint16_t port_ = 0;
  std::string listening_line_;
  std::string stdout_before_;
  std::thread drain_;
};

}  // namespace pagoda::testing_http
