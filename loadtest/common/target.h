// Where a load-test client sends its requests: an http://HOST:PORT base URL
// (no path; loopback or any reachable address). Shared by the loadtest/
// tools (pagoda_soak; a benchmark_serving-style client may sit beside it).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pagoda::loadtest {

struct Target {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
};

// "http://127.0.0.1:8000" (a trailing "/" allowed) → {host, port}. Throws
// std::invalid_argument for anything else (https, a path, no port).
inline Target parse_target_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw std::invalid_argument("URL must start with http://: " + url);
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || rest.find('/') != std::string::npos)
    throw std::invalid_argument("URL must be http://HOST:PORT: " + url);
  Target t;
  t.host = rest.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(rest.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port <= 0 || port > 65535) throw std::invalid_argument("bad port in URL: " + url);
  t.port = static_cast<uint16_t>(port);
  return t;
}

}  // namespace pagoda::loadtest
