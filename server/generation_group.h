// GenerationGroup: the one request pipeline behind every front end (SSE and
// non-streamed HTTP, /v1/ws, `pagoda generate`): a ParsedRequest in, the
// engine requests out, and the engine's deltas back as ChoiceDeltas
// (choice_output.h: text with echo, token ids, logprobs in the request's
// wire format, finish fields, usage). The front ends only frame what it
// produces.
//
// A completions request with k prompts and n choices each becomes k
// GenerateRequests (ids "<request_id>-<i>" when k > 1, vLLM's naming, each
// engine id suffixed "#<serial>" so it is unique in the process even when
// clients reuse a request_id: the response and the engine's log
// (GenerateRequest::external_request_id) still carry theirs), each
// asking the engine for n choices; their deltas come back with the choice
// index rewritten to prompt_index * n + sample_index (vLLM's order), so the
// front end sees one request with k * n choices.
//
// With use_beam_search (ParsedRequest::beam_search) each prompt runs a
// BeamSearch (engine/beam_search.h) instead: every step queues one
// next-token request per running beam (ids "<id>[-<i>]-beam<step>-<j>#<serial>",
// logprobs k, greedy, ignore_eos; their prompt blocks shared through the
// prefix cache), and when a step's requests have all answered, drain()
// advances the search and queues the next step; once it is done the n best
// beams come out as the prompt's n choices, each in one finished delta (as
// vLLM's beam search, also when streamed).
//
// Thread use: every method runs on the owner's strand (or under its lock);
// only the OutputChannels are touched by the engine thread (through their
// notifier, which must only post work elsewhere). submit() may run the
// notifier on the calling thread (an engine that rejects a request at once
// pushes its error there), so it must not be called under a lock the
// notifier takes.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/beam_search.h"
#include "engine/output_channel.h"
#include "engine/request.h"
#include "server/choice_output.h"
#include "server/engine_handle.h"
#include "server/openai_error.h"
#include "server/openai_request.h"

namespace pagoda {

// submit()'s refusal: nothing was queued; the front end answers `error`
// (503 with a Retry-After header of retry_after_s seconds when the waiting
// queue is full; 400 when the request alone exceeds the bound).
inline constexpr int kRetryAfterSeconds = 1;
struct SubmitRefusal {
  OpenAIError error;
  int retry_after_s = 0;  // 0: no Retry-After
};

class GenerationGroup {
 public:
  // Creates one OutputChannel per prompt of req, notify installed on each;
  // nothing is submitted yet.
  GenerationGroup(ParsedRequest req, EngineHandle& engine, std::function<void()> notify);
  GenerationGroup(const GenerationGroup&) = delete;
  GenerationGroup& operator=(const GenerationGroup&) = delete;

  // Submits one GenerateRequest per prompt (sampling.max_tokens set per
  // prompt) to the engine, all or nothing (EngineHandle::add_requests).
  // Once. A refusal (the waiting queue is full) queues nothing and pushes
  // nothing: the caller answers it.
  std::optional<SubmitRefusal> submit();

  const ParsedRequest& request() const { return req_; }
  // Every delta pending on every channel, as choice deltas with request-wide
  // indices; sub-requests in prompt order, one ChoiceDelta per engine delta.
  std::vector<ChoiceDelta> drain();
  // Each choice's output so far (index order) and the usage.
  const std::vector<ChoiceDelta>& choices() const { return assembler_.choices(); }
  int64_t prompt_tokens() const { return assembler_.prompt_tokens(); }
  int64_t completion_tokens() const { return assembler_.completion_tokens(); }
  // True once every choice has its finished delta, or any delta carried an
  // error (the request as a whole has failed; abort() the rest).
  bool done() const { return failed_ || finished_count_ == static_cast<int>(finished_.size()); }
  bool failed() const { return failed_; }
  // The first error delta (valid when failed()).
  const ChoiceDelta& error() const { return *error_; }
  // Sees every engine delta drain() takes, its index already request-wide,
  // just before it becomes a ChoiceDelta: offline callers (server/llm.h)
  // read the logprobs' token ids and ranks there, which the wire formats
  // do not carry. Runs on drain()'s thread.
  void set_delta_tap(std::function<void(const RequestOutput&)> tap) { tap_ = std::move(tap); }
  // Aborts every sub-request that has not finished (client gone, or one
  // sub-request failed), with one EngineHandle::abort_requests command
  // (the engine removes them all in one pass). Only queues the aborts: it
  // pushes nothing on the calling thread. Nothing after a refused submit().
  void abort();

 private:
  // A prompt's beam search in progress: its current step's requests.
  struct Beam {
    std::unique_ptr<BeamSearch> search;
    int step = 0;
    std::vector<std::string> ids;
    std::vector<std::shared_ptr<OutputChannel>> channels;
    std::vector<RequestOutput> outputs;  // merged deltas, per request of the step
    bool done = false;
  };
  struct Sub {
    std::string request_id;   // the engine's: external_id + "#<serial>"
    std::string external_id;  // "<request_id>" or "<request_id>-<i>" (logs)
    std::shared_ptr<OutputChannel> channel;
    int first_index = 0;  // prompt_index * n
    std::shared_ptr<Beam> beam;  // use_beam_search only
  };
  // The engine requests of sub's beam's next step (channels set up).
  std::vector<std::unique_ptr<GenerateRequest>> beam_step_requests(Sub& sub);
  // Drains sub's beam step; advances it when the step is complete: queues
  // the next step, or appends the final choices to out.
  void drain_beam(Sub& sub, std::vector<ChoiceDelta>& out);
  // A failed request: one error delta for choice `index` into out.
  void fail_with(const std::string& error, int status, int index, std::vector<ChoiceDelta>& out);
  ParsedRequest req_;
  EngineHandle& engine_;
  std::function<void()> notify_;
  ChoiceAssembler assembler_;
  int n_ = 1;
  std::vector<Sub> subs_;
  std::vector<bool> finished_;  // per request-wide choice index
  int finished_count_ = 0;
  bool failed_ = false;
  bool submitted_ = false;
  bool refused_ = false;
  std::optional<ChoiceDelta> error_;
  std::function<void(const RequestOutput&)> tap_;
};

}  // namespace pagoda
