#include "loadtest/soak/tally.h"

#include <fmt/format.h>

namespace pagoda::loadtest {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kSseCompletion:
      return "sse_completion";
    case Kind::kSseChat:
      return "sse_chat";
    case Kind::kCompletion:
      return "completion";
    case Kind::kChat:
      return "chat";
    case Kind::kHttpDisconnect:
      return "http_disconnect";
    case Kind::kSlowReader:
      return "slow_reader";
    case Kind::kMalformed:
      return "malformed";
    case Kind::kOversizedPrompt:
      return "oversized_prompt";
    case Kind::kOversizedBody:
      return "oversized_body";
    case Kind::kPartialRequest:
      return "partial_request";
    case Kind::kWsRequest:
      return "ws_request";
    case Kind::kWsCancel:
      return "ws_cancel";
    case Kind::kWsClose:
      return "ws_close";
    case Kind::kWsDrop:
      return "ws_drop";
    case Kind::kWsResume:
      return "ws_resume";
    case Kind::kWsMalformed:
      return "ws_malformed";
    case Kind::kWsOversized:
      return "ws_oversized";
    case Kind::kCount:
      break;
  }
  return "?";
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kClientAborted:
      return "client_aborted";
    case Outcome::kRejectedAsExpected:
      return "rejected_4xx";
    case Outcome::kLost:
      return "LOST";
    case Outcome::kCount:
      break;
  }
  return "?";
}

void Tally::record(Kind kind, Outcome outcome, const std::string& why) {
  std::lock_guard lock(mu_);
  ++counts_[static_cast<size_t>(kind)][static_cast<size_t>(outcome)];
  if (outcome == Outcome::kLost && reasons_.size() < kKeptReasons)
    reasons_.push_back(fmt::format("{}: {}", kind_name(kind), why));
}

uint64_t Tally::count(Kind kind, Outcome outcome) const {
  std::lock_guard lock(mu_);
  return counts_[static_cast<size_t>(kind)][static_cast<size_t>(outcome)];
}

uint64_t Tally::total(Outcome outcome) const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& row : counts_) n += row[static_cast<size_t>(outcome)];
  return n;
}

uint64_t Tally::total() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& row : counts_)
    for (uint64_t c : row) n += c;
  return n;
}

std::vector<std::string> Tally::lost_reasons() const {
  std::lock_guard lock(mu_);
  return reasons_;
}

std::string Tally::table() const {
  std::lock_guard lock(mu_);
  std::string out = fmt::format("{:<18}", "kind");
  for (size_t o = 0; o < static_cast<size_t>(Outcome::kCount); ++o)
    out += fmt::format("{:>15}", outcome_name(static_cast<Outcome>(o)));
  out += "\n";
  for (size_t k = 0; k < static_cast<size_t>(Kind::kCount); ++k) {
    out += fmt::format("{:<18}", kind_name(static_cast<Kind>(k)));
    for (uint64_t c : counts_[k]) out += fmt::format("{:>15}", c);
    out += "\n";
  }
  return out;
}

nlohmann::json Tally::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::object();
  for (size_t k = 0; k < static_cast<size_t>(Kind::kCount); ++k) {
    nlohmann::json row = nlohmann::json::object();
    for (size_t o = 0; o < static_cast<size_t>(Outcome::kCount); ++o)
      row[outcome_name(static_cast<Outcome>(o))] = counts_[k][o];
    out[kind_name(static_cast<Kind>(k))] = row;
  }
  return out;
}

}  // namespace pagoda::loadtest
