// OutputProcessor: turns the engine core's SequenceUpdates into what the
// front ends read (vLLM v1's OutputProcessor / RequestState / ParentRequest,
// vllm/v1/engine/output_processor.py): per sample, incremental
// detokenization, stop strings, logprob assembly and RequestOutput deltas
// pushed to the request's OutputChannel; per request, the n choices of
// best_of samples and the one "finished" state of the request.
//
// Stop strings (vLLM's check_stop_strings / get_next_output_text) are
// matched on the detokenized output text, where a match could end in the new
// text (they may span tokens), once more than min_tokens tokens were output:
// the text is cut before the match (after it with
// include_stop_str_in_output), the sample finishes "stop" with stop_str set,
// and Result::stopped names it so the engine ends its sequence in the
// scheduler (Scheduler::stop) before the next step. While streaming, the
// last (longest stop string - 1) bytes are held back so a partial match is
// never emitted. A token that ended the output as EOS or a stop token id
// adds no text unless include_stop_str_in_output.
//
// Choices: with best_of == n each sample streams its own deltas (index =
// sample index); with best_of > n nothing is sent until every sample
// finished, then the n with the highest cumulative logprob (ties: lower
// index) are sent whole as indices 0..n-1 (vLLM does not stream best_of).
// Prompt logprobs go on the request's first delta, whichever choice: the
// samples run on their own (parallel sampling as child requests) and
// another may sample before sample 0's chunked prefill scored the whole
// prompt, so a request asking for them holds its deltas until they came
// (or sample 0 finished without them) and then sends what it held.
// Engine thread only.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/output_channel.h"
#include "engine/request.h"
#include "engine/sched/sequence_update.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

// Whether a token's text is part of the output: not for the token that
// ended it as EOS or a stop_token_ids id (stop_terminated), unless
// include_stop_str_in_output (vLLM's rule for stop tokens' text).
inline bool shows_token_text(bool stop_terminated, const SamplingParams& sp) {
  return !stop_terminated || sp.include_stop_str_in_output;
}

// A whole output's text as the OutputProcessor makes it for a sample
// (without stop strings): decoded against the prompt, the last token's text
// left out by shows_token_text. For outputs made outside the engine's
// sequences (beam search's beams, server/generation_group.h).
std::string output_text(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                        std::span<const int32_t> output_ids, const SamplingParams& sp,
                        bool stop_terminated);

class OutputProcessor {
 public:
  // tok must outlive the processor (every sample's Detokenizer reads it).
  explicit OutputProcessor(const Tokenizer& tok) : tok_(tok) {}

  // Registers a request before its sequences run: best_of =
  // sampling.best_of or n samples, detokenized against its prompt, deltas
  // to req.output (none when null). Throws std::invalid_argument when the
  // id is registered already.
  void add_request(const GenerateRequest& req);
  bool contains(const std::string& request_id) const { return requests_.count(request_id) != 0; }
  size_t num_requests() const { return requests_.size(); }

  struct Result {
    // Samples (request id, index) that a stop string finished this call:
    // their sequences still run in the scheduler until stopped there.
    std::vector<std::pair<std::string, int>> stopped;
    // One per request that finished this call: the finish reason of its
    // last sample to finish.
    std::vector<FinishReason> finished;
  };
  // Applies updates in order and pushes the deltas they produce. Updates
  // for an unknown request or an already finished sample are ignored (a
  // sample a stop string finished reports its finish again when the
  // scheduler stops it). Appends to `res`.
  void process(std::span<const SequenceUpdate> updates, Result& res);

  // Ends a request: every unfinished sample finishes "abort" with a final
  // delta (best_of > n: the n best samples so far are sent) and the request
  // is forgotten. False when the id is unknown.
  bool abort(const std::string& request_id);
  // Aborts every request (engine shutdown); returns how many.
  int64_t abort_all();

 private:
  struct Sample {
    Sample(const Tokenizer& tok, const std::vector<int32_t>& prompt, bool skip_special)
        : detokenizer(tok, prompt, skip_special) {}
    Detokenizer detokenizer;
    std::vector<int32_t> output_ids;
    std::string text;                    // detokenized output (after stop truncation)
    size_t text_sent = 0;                // bytes of text already in deltas
    size_t tokens_sent = 0;              // output ids already in deltas
    std::vector<TokenLogprob> logprobs;  // parallel to output_ids when asked
    double cumulative_logprob = 0.0;
    std::optional<double> first_token_s;
    int64_t num_cached_tokens = 0;
    bool finished = false;
    bool final_sent = false;  // its finished delta went out
    FinishReason finish_reason = FinishReason::kNone;
    std::optional<std::string> stop_str;
    std::optional<int32_t> stop_token_id;
  };
  struct Request {
    std::string request_id;
    std::shared_ptr<OutputChannel> output;
    SamplingParams sampling;
    int64_t num_prompt_tokens = 0;
    std::chrono::steady_clock::time_point arrival_time;
    int n = 1;
    std::vector<Sample> samples;  // [best_of]
    int num_finished = 0;
    std::optional<std::vector<PromptLogprob>> prompt_logprobs;
    bool prompt_logprobs_sent = false;
    bool streams() const { return static_cast<int>(samples.size()) == n; }
    // Deltas wait for the prompt logprobs (see above).
    bool holding() const {
      return sampling.prompt_logprobs && !prompt_logprobs && !samples[0].finished;
    }
  };

  // Applies one update to its sample; true when a stop string finished it.
  bool apply(Request& r, Sample& s, const SequenceUpdate& u);
  // The sample's delta since its last one (advances the sent offsets).
  RequestOutput make_delta(Request& r, Sample& s, int index);
  // Streams: pushes s's delta unless the request holds its deltas or s's
  // finished delta went out.
  void send(Request& r, Sample& s);
  // Sends every sample's held delta (after the hold ended).
  void flush(Request& r);
  // Marks s finished; when the request is done sends the best_of results
  // and returns true.
  bool finish(Request& r, Sample& s, FinishReason reason);
  void emit_best(Request& r);

  const Tokenizer& tok_;
  std::unordered_map<std::string, Request> requests_;
};

}  // namespace pagoda
