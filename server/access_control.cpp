#include "server/access_control.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "server/openai_error.h"
#include "server/router.h"

namespace pagoda {

namespace http = boost::beast::http;

bool constant_time_equal(std::string_view a, std::string_view b) {
  size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

bool path_requires_key(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  return path.substr(0, 3) == "/v1" || path == "/tokenize" || path == "/detokenize" || path == "/generate";
}

namespace {

bool origin_allowed(const AccessPolicy& policy, std::string_view origin) {
  if (origin.empty()) return false;
  for (const std::string& o : policy.allowed_origins)
    if (o == "*" || o == origin) return true;
  return false;
}

// True when `authorization` is "Bearer <key>" with <key> equal to policy.api_key (compared in constant time).
bool bearer_matches(const AccessPolicy& policy, std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  return authorization.size() >= kBearer.size() && authorization.substr(0, kBearer.size()) == kBearer &&
         constant_time_equal(authorization.substr(kBearer.size()), policy.api_key);
}

bool wildcard(const AccessPolicy& policy) {
  for (const std::string& o : policy.allowed_origins)
    if (o == "*") return true;
  return false;
}

}  // namespace

HeaderList cors_headers(const AccessPolicy& policy, std::string_view origin) {
  HeaderList h;
  if (!origin_allowed(policy, origin)) return h;
  h.emplace_back("Access-Control-Allow-Origin", wildcard(policy) ? std::string("*") : std::string(origin));
  if (!wildcard(policy)) h.emplace_back("Vary", "Origin");
  return h;
}

std::optional<RouteResult> check_access(const AccessPolicy& policy, http::verb method, std::string_view target,
                                        std::string_view authorization, std::string_view origin,
                                        std::string_view request_headers) {
  if (method == http::verb::options && !policy.allowed_origins.empty() && !origin.empty()) {
    if (!origin_allowed(policy, origin)) {
      RouteResult r = RouteResult::json(400, "");
      r.content_type = "text/plain";
      r.body = "Disallowed CORS origin";
      return r;
    }
    RouteResult r = RouteResult::json(200, "");
    r.content_type = "text/plain";
    r.body = "OK";
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    r.headers.emplace_back("Access-Control-Allow-Headers",
                           request_headers.empty() ? std::string("Authorization, Content-Type") : std::string(request_headers));
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    return r;
  }
  if (policy.api_key.empty() || !path_requires_key(target)) return std::nullopt;
  if (bearer_matches(policy, authorization)) return std::nullopt;
  RouteResult r = RouteResult::error(make_error(
      401, authorization.empty() ? "Unauthorized: missing 'Authorization: Bearer <key>' header"
                                 : "Unauthorized: invalid API key"));
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

namespace {

// RFC 3986 section 2.1 percent-decoding of a query value ("%2F" -> "/").
// '+' stays '+' (browsers' encodeURIComponent writes a '+' as "%2B", and a
// key typed raw into a URL keeps its '+'). nullopt for a malformed escape.
std::optional<std::string> percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

bool websocket_access_ok(const AccessPolicy& policy, std::string_view target, std::string_view authorization) {
  if (policy.api_key.empty()) return true;
  if (bearer_matches(policy, authorization)) return true;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return false;
  std::string_view query = target.substr(q + 1);
  bool ok = false;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    constexpr std::string_view kKey = "api_key=";
    if (kv.substr(0, kKey.size()) == kKey) {
      const std::optional<std::string> value = percent_decode(kv.substr(kKey.size()));
      if (value && constant_time_equal(*value, policy.api_key)) ok = true;
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return ok;
}

namespace {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// "host[:port]" (an IPv6 literal in brackets) as (host, port); the port is
// default_port when absent. nullopt when malformed.
std::optional<std::pair<std::string, std::string>> split_authority(std::string_view a,
                                                                   std::string_view default_port) {
  if (a.empty()) return std::nullopt;
  size_t host_end = a.size();
  if (a.front() == '[') {
    host_end = a.find(']');
    if (host_end == std::string_view::npos) return std::nullopt;
    ++host_end;
  } else {
    host_end = a.find(':');
    if (host_end == std::string_view::npos) host_end = a.size();
  }
  std::string_view host = a.substr(0, host_end), rest = a.substr(host_end);
  if (host.empty()) return std::nullopt;
  if (rest.empty()) return std::make_pair(ascii_lower(host), std::string(default_port));
  if (rest.front() != ':' || rest.size() == 1) return std::nullopt;
  std::string_view port = rest.substr(1);
  for (char c : port)
    if (c < '0' || c > '9') return std::nullopt;
  return std::make_pair(ascii_lower(host), std::string(port));
}

bool same_origin(std::string_view origin, std::string_view host) {
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return false;  // "null", or not an origin
  const std::string scheme = ascii_lower(origin.substr(0, sep));
  std::string_view default_port;
  if (scheme == "http" || scheme == "ws")
    default_port = "80";
  else if (scheme == "https" || scheme == "wss")
    default_port = "443";
  else
    return false;
  std::string_view authority = origin.substr(sep + 3);
  if (!authority.empty() && authority.back() == '/') authority.remove_suffix(1);
  if (authority.find_first_of("/?#@") != std::string_view::npos) return false;
  const auto o = split_authority(authority, default_port);
  const auto h = split_authority(host, default_port);
  return o && h && *o == *h;
}

}  // namespace

bool websocket_origin_ok(const AccessPolicy& policy, std::string_view origin,
                         std::string_view host) {
  return origin.empty() || origin_allowed(policy, origin) || same_origin(origin, host);
}

std::vector<std::string> parse_allowed_origins(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    if (!v.empty() && v.front() == '[') {
      nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
      if (!j.is_array()) throw std::invalid_argument("--allowed-origins: not a JSON list of strings: " + v);
      for (const auto& e : j) {
        if (!e.is_string()) throw std::invalid_argument("--allowed-origins: not a JSON list of strings: " + v);
        out.push_back(e.get<std::string>());
      }
      continue;
    }
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace pagoda
