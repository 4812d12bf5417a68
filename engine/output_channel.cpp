#include "engine/output_channel.h"

#include <utility>

namespace pagoda {

const char* finish_reason_str(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: return "";
  }
  return "";
}

void OutputChannel::push(RequestOutput out) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (out.finished) finished_ = true;
    bool was_empty = pending_.empty();
    pending_.push_back(std::move(out));
    if (was_empty) notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

std::vector<RequestOutput> OutputChannel::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RequestOutput> out(std::make_move_iterator(pending_.begin()),
                                 std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

std::vector<RequestOutput> OutputChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.empty(); });
  std::vector<RequestOutput> out(std::make_move_iterator(pending_.begin()),
                                 std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

void OutputChannel::set_notifier(std::function<void()> fn) {
  bool has_pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(fn);
    has_pending = !pending_.empty();
  }
  if (has_pending && notify_) notify_();
}

bool OutputChannel::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

RequestOutput collect(OutputChannel& ch) {
  RequestOutput merged;
  for (;;) {
    for (RequestOutput& d : ch.wait(std::chrono::milliseconds(1000))) {
      merged.request_id = d.request_id;
      merged.index = d.index;
      merged.token_ids.insert(merged.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
      merged.text += d.text;
      merged.prompt_tokens = d.prompt_tokens;
      merged.completion_tokens = d.completion_tokens;
      if (d.first_token_s >= 0 && merged.first_token_s < 0) merged.first_token_s = d.first_token_s;
      if (d.finished) {
        merged.finished = true;
        merged.finish_reason = d.finish_reason;
        merged.stop_str = d.stop_str;
        merged.stop_token_id = d.stop_token_id;
        merged.error = d.error;
        return merged;
      }
    }
  }
}

}  // namespace pagoda
