// GenerationGroup: the engine requests behind one API request. A
// completions request with k prompts and n choices each becomes k
// GenerateRequests (ids "<request_id>-<i>" when k > 1, vLLM's naming), each
// asking the engine for n choices; their deltas come back with the choice
// index rewritten to prompt_index * n + sample_index (vLLM's order), so the
// formatter sees one request with k * n choices.
//
// Thread use: the constructor and every method run on the owning
// connection's strand; only the OutputChannels are touched by the engine
// thread (through their notifier, which must only post work elsewhere).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/output_channel.h"
#include "engine/request.h"
#include "server/engine_handle.h"
#include "server/openai_request.h"

namespace pagoda {

class GenerationGroup {
 public:
  // Submits one GenerateRequest per prompt of req (sampling.max_tokens set
  // per prompt) to engine. notify is installed on every channel.
  GenerationGroup(const ParsedRequest& req, EngineHandle& engine, std::function<void()> notify);

  // Every delta pending on every channel, indices rewritten; sub-requests in
  // prompt order.
  std::vector<RequestOutput> drain();
  // True once every choice has its finished delta, or any delta carried an
  // error (the request as a whole has failed; abort() the rest).
  bool done() const { return failed_ || finished_count_ == static_cast<int>(finished_.size()); }
  bool failed() const { return failed_; }
  // Aborts every sub-request that has not finished (client gone, or one
  // sub-request failed).
  void abort();

 private:
  struct Sub {
    std::string request_id;
    std::shared_ptr<OutputChannel> channel;
    int first_index = 0;  // prompt_index * n
  };
  EngineHandle& engine_;
  int n_ = 1;
  std::vector<Sub> subs_;
  std::vector<bool> finished_;  // per global choice index
  int finished_count_ = 0;
  bool failed_ = false;
};

}  // namespace pagoda
