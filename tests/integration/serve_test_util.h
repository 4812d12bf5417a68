// Shared helpers for the integration tests: the reference files, and
// one-call completion / streaming requests against a running server.
#pragma once
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/integration/http_client.h"
#include "tests/integration/server_process.h"

namespace pagoda::testing_http {

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json read_json_file(const std::string& path) { return nlohmann::json::parse(read_text_file(path)); }

inline std::string shared_path(const std::string& rel) { return std::string(PAGODA_SHARED_DIR) + "/" + rel; }

// A whole streamed response, parsed.
struct StreamResult {
  int status = 0;
  std::string text;           // joined deltas (text or delta.content)
  std::vector<int32_t> token_ids;  // joined, when return_token_ids
  std::string finish_reason;
  std::string role;           // chat: the first chunk's delta.role
  nlohmann::json usage;       // the usage chunk's, if any
  size_t events = 0;          // data: events, [DONE] included
  bool done = false;          // ended with [DONE]
  std::string error_body;     // non-200 body
};

inline StreamResult parse_stream(const HttpResponse& r) {
  StreamResult s;
  s.status = r.status;
  if (r.status != 200) {
    s.error_body = r.body;
    return s;
  }
  auto events = sse_payloads(r.body);
  s.events = events.size();
  for (const std::string& e : events) {
    if (e == "[DONE]") {
      s.done = true;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(e);
    if (j.contains("usage") && !j["usage"].is_null()) s.usage = j["usage"];
    if (j["choices"].empty()) continue;
    const nlohmann::json& c = j["choices"][0];
    if (c.contains("delta")) {
      if (c["delta"].contains("role")) s.role = c["delta"]["role"];
      if (c["delta"].contains("content") && c["delta"]["content"].is_string())
        s.text += c["delta"]["content"].get<std::string>();
    } else {
      s.text += c["text"].get<std::string>();
    }
    if (c.contains("token_ids"))
      for (const auto& t : c["token_ids"]) s.token_ids.push_back(t.get<int32_t>());
    if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
  }
  return s;
}

inline StreamResult stream_request(uint16_t port, const std::string& path, nlohmann::json body) {
  body["stream"] = true;
  HttpClient c(port);
  return parse_stream(c.post(path, body.dump()));
}

inline nlohmann::json post_json(uint16_t port, const std::string& path, const nlohmann::json& body,
                                int expected_status = 200) {
  HttpClient c(port);
  HttpResponse r = c.post(path, body.dump());
  EXPECT_EQ(r.status, expected_status) << body.dump() << " → " << r.body;
  return nlohmann::json::parse(r.body);
}

// A metric's value from /metrics text ("pagoda:num_requests_running"; the
// first sample whose line starts with the name and, if given, contains
// label_part). -1 if absent.
inline double metric(const std::string& text, const std::string& name, const std::string& label_part = "") {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    if (!label_part.empty() && line.find(label_part) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// A suite sharing one `pagoda serve` of the bundled model (no extra flags),
// started before its first test and required to exit 0 after its last.
// CRTP: each suite (Derived) gets its own server pointer. The server runs
// the bundled model with no flags unless Derived declares its own
// `static std::vector<std::string> server_args()`.
template <class Derived>
class BundledServerSuite : public ::testing::Test {
 protected:
  static std::vector<std::string> server_args() { return {}; }
  static void SetUpTestSuite() { server_ = new PagodaServer(Derived::server_args()); }
  static void TearDownTestSuite() {
    int status = server_->stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  static inline PagodaServer* server_ = nullptr;
};

}  // namespace pagoda::testing_http
