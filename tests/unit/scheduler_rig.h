// SchedulerRig: the real Scheduler, BlockManager (and HostBlockPool),
// OutputProcessor and ModelRunner over the FakeExecutor
// (engine_test_fakes.h), for scheduler tests: add() queues a request of fake
// prompt tokens, step() runs one engine step with a fixed sampled token,
// routes the updates through the OutputProcessor (deltas to the request's
// channel; stop strings back to Scheduler::stop, as the Engine does) and
// checks the scheduler's invariants after schedule and postprocess (the
// FakeExecutor checks every KV read against the tokens written, so a wrong
// block or chunk throws).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/kv/block_manager.h"
#include "engine/kv/host_block_pool.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/sched/scheduler.h"
#include "engine_test_fakes.h"

namespace pagoda::testing {

// The Engine's routing (engine.cpp process_outputs): updates to the
// processor, the sequences a stop string ended to Scheduler::stop.
inline OutputProcessor::Result route_updates(OutputProcessor& outputs, Scheduler& sched,
                                             std::span<const SequenceUpdate> updates) {
  OutputProcessor::Result r;
  outputs.process(updates, r);
  for (size_t i = 0; i < r.stopped.size(); ++i) {
    const std::vector<SequenceUpdate> more = sched.stop(r.stopped[i].first, r.stopped[i].second);
    outputs.process(more, r);
  }
  return r;
}

struct SchedulerRig {
  // num_host_blocks 0: no swap space (recompute only).
  SchedulerRig(const SchedulerConfig& config, int64_t vocab, int64_t num_blocks, int64_t block_size,
               int64_t num_host_blocks = 0, bool caching = false)
      : tok{vocab},
        exec(vocab, num_blocks, block_size, num_host_blocks),
        blocks(num_blocks, block_size, caching),
        host(num_host_blocks),
        sched(config, blocks, num_host_blocks > 0 ? &host : nullptr),
        outputs(tok),
        runner(exec) {}

  // A request of best_of sequences: `prompt_len` fake tokens (3..32,
  // varied by position and id), max_tokens each, ignore_eos.
  std::shared_ptr<OutputChannel> add(const std::string& id, int64_t prompt_len, int64_t max_tokens,
                                     int best_of = 1) {
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < prompt_len; ++i)
      prompt.push_back(static_cast<int32_t>(3 + (i * 7 + id.size()) % 30));
    return add_tokens(id, std::move(prompt), max_tokens, best_of);
  }
  // The same with the prompt's token ids given.
  std::shared_ptr<OutputChannel> add_tokens(const std::string& id, std::vector<int32_t> prompt,
                                            int64_t max_tokens, int best_of = 1) {
    GenerateRequest req;
    req.request_id = id;
    req.prompt_token_ids = std::move(prompt);
    req.sampling.ignore_eos = true;
    req.output = std::make_shared<OutputChannel>();
    req.sampling.n = best_of;
    auto g = std::make_unique<SequenceGroup>();
    g->request_id = id;
    g->best_of = g->n = best_of;
    for (int i = 0; i < best_of; ++i)
      g->seqs.push_back(std::make_unique<Sequence>(req, max_tokens, 0, i));
    outputs.add_request(req);
    sched.add_group(std::move(g));
    return req.output;
  }

  // One engine step; returns its output (its sequence pointers may be gone
  // by then: a finished group is freed in postprocess); `scheduled` holds
  // (request id, new tokens) of each sequence it scheduled, in order.
  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    sched.check_invariants();
    scheduled.clear();
    for (const ScheduledSeq& s : out.seqs)
      scheduled.emplace_back(s.seq->request_id, s.num_new_tokens);
    route_updates(outputs, sched, out.finished);
    runner.apply_swaps(out);
    if (!out.empty()) {
      runner.execute(out, logits);
      std::vector<int32_t> sampled(static_cast<size_t>(out.num_samples()),
                                   static_cast<int32_t>(5 + steps % 20));
      route_updates(outputs, sched, sched.postprocess(out, sampled).updates);
      sched.check_invariants();
    }
    ++steps;
    return out;
  }
  // Aborts a request in the scheduler and the processor, as the Engine
  // does; true when the scheduler knew it.
  bool abort(const std::string& id) {
    outputs.abort(id);
    return sched.abort(id);
  }
  // step(), then what it scheduled.
  std::vector<std::pair<std::string, int64_t>> step_scheduled() {
    step();
    return scheduled;
  }
  // Steps until no request is left; fails the test if 1000 steps do not
  // get there.
  std::vector<SchedulerOutput> run_to_end() {
    std::vector<SchedulerOutput> outs;
    for (int k = 0; k < 1000 && sched.has_unfinished(); ++k) outs.push_back(step());
    EXPECT_FALSE(sched.has_unfinished());
    return outs;
  }

  FakeTokenizer tok;
  FakeExecutor exec;
  BlockManager blocks;
  HostBlockPool host;
  Scheduler sched;
  OutputProcessor outputs;
  ModelRunner runner;
  std::vector<float> logits;
  int64_t steps = 0;
  std::vector<std::pair<std::string, int64_t>> scheduled;
};

}  // namespace pagoda::testing
