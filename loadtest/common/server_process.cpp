#include "loadtest/common/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

namespace pagoda::loadtest {

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (fd >= 0 && n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

ServerProcess::ServerProcess(const std::string& binary, const std::vector<std::string>& args,
                             const std::string& log_path, std::chrono::seconds startup_timeout) {
  std::vector<std::string> argv_s = {binary, "serve"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  for (const char* a : {"--host", "127.0.0.1", "--port", "0"}) argv_s.push_back(a);
  int log_fd = log_path.empty()
                   ? -1
                   : ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_fd_ = fds[0];
  const std::string marker = "Pagoda listening on http://";
  auto deadline = std::chrono::steady_clock::now() + startup_timeout;
  std::string out;
  for (;;) {
    size_t at = out.find(marker);
    size_t nl = at == std::string::npos ? std::string::npos : out.find('\n', at);
    if (nl != std::string::npos) {
      std::string line = out.substr(at, nl - at);
      port_ = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
      write_all(log_fd, out.data(), out.size());
      drain_ = std::thread([fd = out_fd_, log_fd] {
        char buf[65536];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0)
          write_all(log_fd, buf, static_cast<size_t>(n));
        if (log_fd >= 0) ::close(log_fd);
      });
      return;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out_fd_, POLLIN, 0};
    char buf[4096];
    ssize_t n = left.count() > 0 && ::poll(&p, 1, static_cast<int>(left.count())) > 0
                    ? ::read(out_fd_, buf, sizeof buf)
                    : -1;
    if (n <= 0) {
      write_all(log_fd, out.data(), out.size());
      if (log_fd >= 0) ::close(log_fd);
      stop(std::chrono::seconds(5));
      throw std::runtime_error("pagoda serve did not start (no listening line); its output:\n" +
                               out);
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

ServerProcess::~ServerProcess() { stop(std::chrono::seconds(10)); }

bool ServerProcess::alive() {
  if (pid_ <= 0) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ServerProcess::stop(std::chrono::seconds bound, bool* within_bound) {
  if (within_bound) *within_bound = true;
  if (alive()) {
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + bound;
    // Polled every 10 ms: waitpid has no timeout, and SIGCHLD handling would
    // reach into the caller's signal setup.
    while (alive() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (alive()) {
      if (within_bound) *within_bound = false;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
  }
  if (drain_.joinable()) drain_.join();
  if (out_fd_ >= 0) {
    ::close(out_fd_);
    out_fd_ = -1;
  }
  return status_;
}

}  // namespace pagoda::loadtest
