// The JSON payloads of a Server-Sent Events body ("data: <json>\n\n" ...),
// the final "data: [DONE]" left out: for tests of the streamed wire format.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pagoda::testing_sse {

inline std::vector<nlohmann::json> sse_chunks(const std::string& sse) {
  std::vector<nlohmann::json> chunks;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    size_t end = sse.find("\n\n", pos);
    std::string payload = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload != "[DONE]") chunks.push_back(nlohmann::json::parse(payload));
  }
  return chunks;
}

}  // namespace pagoda::testing_sse
