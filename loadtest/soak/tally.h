// What happened to every request the soak sent, by kind and outcome
// (thread-safe). "lost" is any well-formed request that neither completed
// nor was ended by the client's own action, and any malformed one that did
// not get its 4xx; each comes with a reason, the first ones kept for the
// report.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pagoda::loadtest {

enum class Kind {
  kSseCompletion,  // stream: true, read to [DONE]
  kSseChat,
  kCompletion,  // non-streamed
  kChat,
  kHttpDisconnect,   // the client hangs up mid-stream / before the response
  kSlowReader,       // SSE read a few hundred bytes at a time through a small window
  kMalformed,        // bad JSON / bad field values → 400
  kOversizedPrompt,  // prompt beyond max_model_len → 400
  kOversizedBody,    // Content-Length beyond the body limit → 413
  kPartialRequest,   // half a request (headers or body cut short), then the client leaves
  kWsRequest,        // /v1/ws chat or completion read to its done
  kWsCancel,         // a `cancel` after the first delta → done "abort"
  kWsClose,          // close frame mid-stream
  kWsDrop,           // TCP gone mid-stream, resumable: false
  kWsResume,         // TCP gone mid-stream, then `resume` on a new socket → the rest, then done
  kWsMalformed,      // bad message → error, code 400; the socket stays usable
  kWsOversized,      // prompt beyond max_model_len → error, code 400
  kCount
};

enum class Outcome {
  kCompleted,           // finish_reason stop/length ([DONE] / done seen)
  kClientAborted,       // ended by the client (disconnect, close, cancel)
  kRejectedAsExpected,  // the expected 4xx
  kLost,                // anything else: a violation
  kCount
};

const char* kind_name(Kind k);
const char* outcome_name(Outcome o);

class Tally {
 public:
  void record(Kind kind, Outcome outcome, const std::string& why = "");
  uint64_t count(Kind kind, Outcome outcome) const;
  uint64_t total(Outcome outcome) const;
  uint64_t total() const;
  // The first few reasons for kLost, "kind: reason".
  std::vector<std::string> lost_reasons() const;
  // A table (kinds × outcomes), as text and as JSON.
  std::string table() const;
  nlohmann::json to_json() const;

 private:
  static constexpr size_t kKeptReasons = 40;
  mutable std::mutex mu_;
  std::array<std::array<uint64_t, static_cast<size_t>(Outcome::kCount)>,
             static_cast<size_t>(Kind::kCount)>
      counts_{};
  std::vector<std::string> reasons_;
};

}  // namespace pagoda::loadtest
