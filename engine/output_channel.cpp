#include "engine/output_channel.h"

#include <algorithm>
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
    if (!out.error.empty()) finished_ = true;
    if (out.finished && std::find(finished_indices_.begin(), finished_indices_.end(), out.index) ==
                            finished_indices_.end())
      finished_indices_.push_back(out.index);
    if (static_cast<int>(finished_indices_.size()) >= num_choices_) finished_ = true;
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

void OutputChannel::set_num_choices(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  num_choices_ = n < 1 ? 1 : n;
}

int OutputChannel::num_choices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_choices_;
}

bool OutputChannel::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

namespace {

void merge(RequestOutput& merged, RequestOutput& d) {
  merged.request_id = d.request_id;
  merged.index = d.index;
  merged.token_ids.insert(merged.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  merged.text += d.text;
  merged.logprobs.insert(merged.logprobs.end(), std::make_move_iterator(d.logprobs.begin()),
                         std::make_move_iterator(d.logprobs.end()));
  merged.cumulative_logprob = d.cumulative_logprob;
  merged.prompt_tokens = d.prompt_tokens;
  merged.completion_tokens = d.completion_tokens;
  if (d.first_token_s >= 0 && merged.first_token_s < 0) merged.first_token_s = d.first_token_s;
  if (d.finished) {
    merged.finished = true;
    merged.finish_reason = d.finish_reason;
    merged.stop_str = d.stop_str;
    merged.stop_token_id = d.stop_token_id;
    merged.error = d.error;
    merged.error_status = d.error_status;
  }
}

}  // namespace

RequestOutput collect(OutputChannel& ch) {
  RequestOutput merged;
  for (;;) {
    for (RequestOutput& d : ch.wait(std::chrono::milliseconds(1000))) {
      merge(merged, d);
      if (d.finished && (ch.num_choices() == 1 || !d.error.empty())) return merged;
    }
    if (ch.num_choices() > 1 && ch.finished()) {
      for (RequestOutput& d : ch.drain()) merge(merged, d);
      merged.finished = true;
      return merged;
    }
  }
}

std::vector<RequestOutput> collect_all(OutputChannel& ch) {
  std::vector<RequestOutput> out(static_cast<size_t>(ch.num_choices()));
  for (;;) {
    for (RequestOutput& d : ch.wait(std::chrono::milliseconds(1000))) {
      if (!d.error.empty()) {
        RequestOutput e;
        merge(e, d);
        return {e};
      }
      if (d.index < 0) continue;  // not a choice: never sent by the engine
      if (static_cast<size_t>(d.index) >= out.size()) out.resize(static_cast<size_t>(d.index) + 1);
      merge(out[static_cast<size_t>(d.index)], d);
    }
    if (ch.finished()) {
      for (RequestOutput& d : ch.drain())
        if (d.index >= 0 && static_cast<size_t>(d.index) < out.size()) merge(out[static_cast<size_t>(d.index)], d);
      return out;
    }
  }
}

}  // namespace pagoda
