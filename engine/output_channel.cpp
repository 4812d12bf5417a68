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

void push_error(const GenerateRequest& req, const std::string& error, int status) {
  if (!req.output) return;
  RequestOutput out;
  out.request_id = req.request_id;
  out.finished = true;
  out.finish_reason = FinishReason::kAbort;
  out.prompt_tokens = static_cast<int64_t>(req.prompt_token_ids.size());
  out.error = error;
  out.error_status = status;
  req.output->push(std::move(out));
}

void merge_delta(RequestOutput& into, const RequestOutput& d) {
  into.request_id = d.request_id;
  into.index = d.index;
  into.text += d.text;
  into.token_ids.insert(into.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  into.logprobs.insert(into.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  into.cumulative_logprob = d.cumulative_logprob;
  if (d.prompt_logprobs) into.prompt_logprobs = d.prompt_logprobs;
  into.prompt_tokens = d.prompt_tokens;
  into.num_cached_tokens = d.num_cached_tokens;
  into.completion_tokens = d.completion_tokens;
  if (d.first_token_s >= 0 && into.first_token_s < 0) into.first_token_s = d.first_token_s;
  if (d.finished || !d.error.empty()) {
    into.finished = true;
    into.finish_reason = d.finish_reason;
    into.stop_str = d.stop_str;
    into.stop_token_id = d.stop_token_id;
    into.error = d.error;
    into.error_status = d.error_status;
  }
}

RequestOutput collect(OutputChannel& ch) {
  RequestOutput merged;
  for (;;) {
    for (RequestOutput& d : ch.wait(std::chrono::milliseconds(1000))) {
      merge_delta(merged, d);
      if (d.finished && (ch.num_choices() == 1 || !d.error.empty())) return merged;
    }
    if (ch.num_choices() > 1 && ch.finished()) {
      for (RequestOutput& d : ch.drain()) merge_delta(merged, d);
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
        merge_delta(e, d);
        return {e};
      }
      if (d.index < 0) continue;  // not a choice: never sent by the engine
      if (static_cast<size_t>(d.index) >= out.size()) out.resize(static_cast<size_t>(d.index) + 1);
      merge_delta(out[static_cast<size_t>(d.index)], d);
    }
    if (ch.finished()) {
      for (RequestOutput& d : ch.drain())
        if (d.index >= 0 && static_cast<size_t>(d.index) < out.size()) merge_delta(out[static_cast<size_t>(d.index)], d);
      return out;
    }
  }
}

}  // namespace pagoda
