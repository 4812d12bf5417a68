// OutputChannel: the per-request pipe from the engine thread to whoever waits
// on the request (an HTTP/SSE session, a WebSocket, an offline caller).
// The engine thread push()es deltas and never blocks on the reader: deltas
// accumulate while the reader is busy and the reader drains them all at once
// (coalescing). A notifier (e.g. asio::post onto the connection's strand) is
// called after a push that found the channel empty.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/request.h"

namespace pagoda {

class OutputChannel {
 public:
  // Engine thread. Never blocks beyond a short critical section.
  void push(RequestOutput out);

  // Reader side. Takes every pending delta (possibly none).
  std::vector<RequestOutput> drain();
  // Blocks until at least one delta is pending or `timeout` passes; returns
  // what is pending (empty on timeout).
  std::vector<RequestOutput> wait(std::chrono::milliseconds timeout);
  // Installs the wake-up called after a push onto an empty channel; called on
  // the engine thread, so it must only post work elsewhere.
  void set_notifier(std::function<void()> fn);
  // True once every choice has pushed its finished delta (one for n = 1),
  // or a delta with a non-empty error was pushed.
  bool finished() const;
  // The number of choices (SamplingParams::n, >= 1) whose finished deltas
  // end the channel. Engine::add_request sets it before the request is
  // queued; default 1.
  void set_num_choices(int n);
  int num_choices() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> pending_;
  std::function<void()> notify_;
  bool finished_ = false;
  int num_choices_ = 1;
  std::vector<int> finished_indices_;
};

// Ends req with an error before it produced anything: pushes one finished
// delta (finish_reason abort, prompt_tokens = the prompt's length, `error`,
// error_status = `status`: 400 invalid request, 503 shutting down) onto
// req.output; nothing when req has no output channel.
void push_error(const GenerateRequest& req, const std::string& error, int status = 400);

// Appends delta d to `into`: text, token ids and logprobs concatenated;
// prompt logprobs taken from d when it carries them;
// cumulative logprob, usage and index from d; the first-token time once;
// the finish fields (finish_reason, stop_str / stop_token_id, error and its
// status) when d is finished or carries an error. Deltas of one choice, in
// order (or one request's, for collect()).
void merge_delta(RequestOutput& into, const RequestOutput& d);

// Collects a whole request synchronously (offline use and tests): waits for
// the finished delta and returns the deltas merged into one.
// With n > 1, the deltas of all choices are merged into one (use
// collect_all()).
RequestOutput collect(OutputChannel& ch);
// Collects every choice until the channel is finished: element i merges
// choice i's deltas (token ids, text, logprobs concatenated; cumulative
// logprob, usage and finish fields from its last delta). On an error delta
// the result has one element carrying the error.
std::vector<RequestOutput> collect_all(OutputChannel& ch);

}  // namespace pagoda
