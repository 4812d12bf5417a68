// Engine / EngineImpl: the step loop (engine.h) and the engine thread.
#include "engine/engine.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "engine/kv/block_manager.h"
#include "engine/latency_tracker.h"
#include "engine/model_runner.h"
#include "engine/output_channel.h"
#include "engine/output_processor.h"
#include "engine/request_queue.h"
#include "engine/sample/bad_words.h"
#include "engine/sample/prompt_logprobs.h"
#include "engine/sample/sampler.h"
#include "engine/sched/scheduler.h"
#include "engine/stats_logger.h"

namespace pagoda {
namespace {

// splitmix64 (Steele et al. 2014): decorrelates consecutive request counters.
uint64_t mix_seed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

SchedulerConfig scheduler_config(const EngineConfig& c, const Tokenizer& tok,
                                 const ModelExecutor& exec) {
  SchedulerConfig s;
  s.sliding_window = exec.uniform_sliding_window();
  s.max_num_seqs = c.max_num_seqs;
  s.max_num_batched_tokens = c.max_num_batched_tokens;
  s.max_model_len = c.max_model_len;
  s.max_prompt_logprob_tokens = c.max_prompt_logprob_tokens;
  s.long_prefill_token_threshold = c.long_prefill_token_threshold;
  s.max_prefill_tokens_with_decodes = c.max_prefill_tokens_with_decodes;
  s.eos_token_ids = c.eos_token_ids;
  s.preemption_mode = c.preemption_mode;
  if (s.eos_token_ids.empty() && tok.eos_token_id()) s.eos_token_ids.push_back(*tok.eos_token_id());
  return s;
}

}  // namespace

class EngineImpl {
 public:
  EngineImpl(EngineConfig cfg, std::unique_ptr<ModelExecutor> exec,
             std::shared_ptr<const Tokenizer> tok)
      : config(std::move(cfg)),
        executor(std::move(exec)),
        tokenizer(std::move(tok)),
        blocks(executor->num_kv_blocks(), executor->block_size(), config.enable_prefix_caching),
        host_blocks(executor->num_host_kv_blocks()),
        scheduler(scheduler_config(config, *tokenizer, *executor), blocks, &host_blocks),
        runner(*executor),
        logger(config.log_stats ? config.log_stats_interval_s : 0.0,
               executor->describe().rfind("cuda", 0) == 0 ? "GPU" : "CPU") {
    if (config.max_num_seqs <= 0 || config.max_num_batched_tokens <= 0 ||
        config.max_model_len <= 0 || config.max_prompt_logprob_tokens <= 0)
      throw std::invalid_argument(
          "EngineConfig: max_num_seqs, max_num_batched_tokens, "
          "max_model_len and max_prompt_logprob_tokens must be > 0");
    if (config.long_prefill_token_threshold < 0)
      throw std::invalid_argument("EngineConfig: long_prefill_token_threshold must be >= 0");
    if (config.max_prefill_tokens_with_decodes < 0)
      throw std::invalid_argument("EngineConfig: max_prefill_tokens_with_decodes must be >= 0");
    published.kv_blocks_total = blocks.num_blocks();
    local.kv_blocks_total = blocks.num_blocks();
    published.cpu_kv_blocks_total = host_blocks.num_blocks();
    local.cpu_kv_blocks_total = host_blocks.num_blocks();
  }

  // Any thread: the engine's own guard; "" when the request is acceptable.
  std::string validate(const GenerateRequest& req) const {
    const int64_t n = static_cast<int64_t>(req.prompt_token_ids.size());
    const SamplingParams& sp = req.sampling;
    if (req.request_id.empty()) return "request_id is empty";
    if (n == 0) return "the prompt is empty";
    for (int32_t id : req.prompt_token_ids)
      if (id < 0 || id >= executor->vocab_size())
        return "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
               std::to_string(executor->vocab_size()) + ")";
    if (sp.n < 1) return "n must be >= 1";
    const int best_of = sp.best_of.value_or(sp.n);
    if (best_of < sp.n) return "best_of must be >= n";
    if (sp.logprobs && (*sp.logprobs < 0 || *sp.logprobs > kMaxLogprobs))
      return "logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "]";
    if (sp.prompt_logprobs && (*sp.prompt_logprobs < 0 || *sp.prompt_logprobs > kMaxLogprobs))
      return "prompt_logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "]";
    for (auto [id, bias] : sp.logit_bias) {
      if (id < 0 || id >= executor->vocab_size())
        return "logit_bias token id " + std::to_string(id) + " is outside the vocabulary";
      if (!(bias >= -100.0f && bias <= 100.0f)) return "logit_bias values must be in [-100, 100]";
    }
    if (sp.min_tokens < 0) return "min_tokens must be >= 0";
    if (sp.max_tokens && sp.min_tokens > *sp.max_tokens) return "min_tokens must be <= max_tokens";
    if (!(sp.presence_penalty >= -2.0f && sp.presence_penalty <= 2.0f))
      return "presence_penalty must be in [-2, 2]";
    if (!(sp.frequency_penalty >= -2.0f && sp.frequency_penalty <= 2.0f))
      return "frequency_penalty must be in [-2, 2]";
    if (sp.temperature < 0) return "temperature must be >= 0";
    if (!(sp.top_p > 0 && sp.top_p <= 1)) return "top_p must be in (0, 1]";
    if (sp.top_k < -1) return "top_k must be -1 (off) or >= 0";
    if (sp.min_p < 0 || sp.min_p > 1) return "min_p must be in [0, 1]";
    if (sp.repetition_penalty <= 0) return "repetition_penalty must be > 0";
    if (sp.max_tokens && *sp.max_tokens < 1) return "max_tokens must be >= 1";
    const int64_t max_tokens = sp.max_tokens.value_or(config.max_model_len - n);
    if (n + max_tokens > config.max_model_len)
      return "prompt (" + std::to_string(n) + " tokens) + max_tokens (" + std::to_string(max_tokens) +
             ") exceeds max_model_len (" + std::to_string(config.max_model_len) + ")";
    if (blocks.blocks_for(n) > blocks.num_blocks())
      return "the prompt (" + std::to_string(n) + " tokens) can never fit the KV cache (" +
             std::to_string(blocks.num_blocks() * blocks.block_size()) + " tokens)";
    return {};
  }

  void admit(std::unique_ptr<GenerateRequest> req) {
    if (scheduler.contains(req->request_id)) {
      push_error(*req, "request id '" + req->request_id + "' is already in use");
      return;
    }
    const int64_t n = static_cast<int64_t>(req->prompt_token_ids.size());
    const int64_t max_tokens = req->sampling.max_tokens.value_or(config.max_model_len - n);
    // One sequence per candidate. A seeded request's sample i draws from
    // seed + i (vLLM v1's parallel sampling), so choice 0 of a seeded n > 1
    // request equals the n = 1 request with the same seed.
    auto group = std::make_unique<SequenceGroup>();
    group->request_id = req->request_id;
    group->n = req->sampling.n;
    group->best_of = req->sampling.best_of.value_or(req->sampling.n);
    for (int i = 0; i < group->best_of; ++i) {
      const uint64_t seed = req->sampling.seed ? *req->sampling.seed + static_cast<uint64_t>(i)
                                               : mix_seed(global_seed + request_counter++);
      group->seqs.push_back(std::make_unique<Sequence>(*req, max_tokens, seed, i));
    }
    outputs.add_request(*req);
    scheduler.add_group(std::move(group));
  }

  // Any thread. Queues a request already counted in waiting_count (the
  // count is returned when it is refused here).
  void enqueue(std::unique_ptr<GenerateRequest> request) {
    struct Uncount {
      std::atomic<int64_t>& count;
      bool armed = true;
      ~Uncount() {
        if (armed) count.fetch_sub(1, std::memory_order_acq_rel);
      }
    } uncount{waiting_count};
    if (!request) return;
    std::string error = validate(*request);
    if (!error.empty()) {
      push_error(*request, error);
      return;
    }
    if (request->output) request->output->set_num_choices(request->sampling.n);
    auto cmd = std::make_unique<Command>();
    cmd->kind = Command::Kind::kAdd;
    cmd->request = std::move(request);
    queue.push(std::move(cmd));  // throws std::bad_alloc: uncounted
    uncount.armed = false;
  }

  // Drains the request queue; true when a command was handled. Aborts are
  // gathered and applied together (one pass over the scheduler's queues),
  // before an add that reuses a pending abort's id, so the order of the
  // commands is kept.
  bool drain() {
    bool any = false;
    while (auto cmd = queue.pop()) {
      any = true;
      if (cmd->kind == Command::Kind::kAdd) {
        ++waiting_accounted;
        if (!pending_abort_ids.empty() && pending_abort_ids.count(cmd->request->request_id))
          apply_aborts();
        admit(std::move(cmd->request));
      } else {
        for (std::string& id : cmd->request_ids) {
          if (pending_abort_ids.insert(id).second) pending_aborts.push_back(std::move(id));
        }
      }
    }
    apply_aborts();
    return any;
  }

  void apply_aborts() {
    if (pending_aborts.empty()) return;
    local.requests_finished_total["abort"] +=
        scheduler.abort(std::span<const std::string>(pending_aborts));
    for (const std::string& id : pending_aborts) {
      outputs.abort(id);
      latency.forget(id);
    }
    pending_aborts.clear();
    pending_abort_ids.clear();
  }

  // Releases the admission counter for requests that left the waiting state
  // (scheduled, aborted, refused) since the last call. Engine thread.
  void settle_waiting() {
    const int64_t now = scheduler.num_unstarted();
    if (waiting_accounted > now)
      waiting_count.fetch_sub(waiting_accounted - now, std::memory_order_acq_rel);
    waiting_accounted = now;
  }

  static int64_t ticks(std::chrono::steady_clock::time_point t) {
    return t.time_since_epoch().count();
  }

  bool step() {
    step_began_ticks.store(ticks(std::chrono::steady_clock::now()), std::memory_order_release);
    struct EndStep {
      EngineImpl& e;
      ~EndStep() {
        e.has_work.store(!e.queue.empty() || e.scheduler.has_unfinished(),
                         std::memory_order_release);
        e.last_step_end_ticks.store(ticks(std::chrono::steady_clock::now()),
                                    std::memory_order_release);
        e.step_began_ticks.store(0, std::memory_order_release);
      }
    } end_step{*this};
    bool did = drain();
    SchedulerOutput out = scheduler.schedule();
    if (config.check_invariants) scheduler.check_invariants();
    // Before the forward, also when nothing runs this step (a swap-out's
    // blocks may be written by the next one).
    runner.apply_swaps(out);
    local.num_preemptions_total = scheduler.num_preemptions_total();
    did = did || out.num_preempted > 0 || out.num_swapped_in > 0 || !out.finished.empty();
    process_outputs(out.finished);
    if (!out.empty()) {
      if (!runner.execute_and_sample(out, scheduler.config().eos_token_ids, sampled)) {
        runner.execute(out, logits);
        // Prompt-logprob rows follow the sampling rows (prompt_logprobs.h).
        record_prompt_logprobs(out, logits, executor->vocab_size());
        sample(out);
      }
      timed.clear();
      for (const ScheduledSeq& s : out.seqs)
        if (s.samples)
          timed.push_back({s.seq->request_id, s.seq->index, s.seq->arrival_time,
                           s.seq->num_prompt_tokens,
                           config.log_requests ? s.seq->external_request_id : std::string()});
      PostprocessResult res = scheduler.postprocess(out, sampled);
      process_outputs(res.updates);
      if (config.check_invariants) scheduler.check_invariants();
      const auto now = std::chrono::steady_clock::now();
      // A request's prompt counts once, at its first token (as its usage
      // does), not per sequence nor per recomputation after preemption.
      for (const TimedToken& t : timed)
        if (latency.on_token(t.request_id, t.seq_index, t.arrival, now, local))
          local.prompt_tokens_total += t.num_prompt_tokens;
      for (const TimedToken& t : timed) {
        if (scheduler.contains(t.request_id)) continue;
        auto timings = latency.finish(t.request_id, t.arrival, now, local);
        // --enable-log-requests: the request's own timings (the values its
        // histograms observed), e.g. for a benchmark client to compare with.
        if (timings && config.log_requests)
          spdlog::info("Finished request {}: prompt_tokens={} ttft_ms={:.3f} e2e_ms={:.3f}",
                       t.external_request_id, t.num_prompt_tokens, timings->ttft_s * 1e3,
                       timings->e2e_s * 1e3);
      }
      local.generation_tokens_total += res.num_generated;
      local.steps_total++;
      did = true;
    }
    publish();
    return did;
  }

  // Text, stop strings and deltas for the core's updates; the sequences a
  // stop string ended leave the scheduler before the next step.
  void process_outputs(std::span<const SequenceUpdate> updates) {
    if (updates.empty()) return;
    OutputProcessor::Result r;
    outputs.process(updates, r);
    for (size_t i = 0; i < r.stopped.size(); ++i) {
      const std::vector<SequenceUpdate> more =
          scheduler.stop(r.stopped[i].first, r.stopped[i].second);
      outputs.process(more, r);
    }
    for (FinishReason f : r.finished) local.requests_finished_total[finish_reason_str(f)]++;
  }

  // One token (with its raw logprob when wanted) for every sampling
  // sequence, from its own logits row.
  void sample(const SchedulerOutput& out) {
    const size_t vocab = static_cast<size_t>(executor->vocab_size());
    sampled.clear();
    size_t row = 0;
    for (const ScheduledSeq& s : out.seqs) {
      if (!s.samples) continue;
      sampled.push_back(sample_one(*s.seq, std::span<float>(logits.data() + row * vocab, vocab)));
      ++row;
    }
  }

  TokenLogprob sample_one(Sequence& seq, std::span<float> row) {
    suppress.clear();
    append_sampling_bans(seq.sampling, seq.output_ids(), scheduler.config().eos_token_ids, suppress);
    SampleInput in{&seq.sampling, seq.prompt_ids(), seq.output_ids(), suppress, &seq.rng};
    if (seq.sampling.guide && seq.guide_state >= 0) {
      in.guided_mask = &seq.sampling.guide->mask(seq.guide_state);
      in.guided_accepting = seq.sampling.guide->accepting(seq.guide_state);
      in.eos_ids = scheduler.config().eos_token_ids;
    }
    return Sampler::sample_with_logprobs(row, in);
  }

  void publish() {
    settle_waiting();
    latency.prune(static_cast<size_t>(scheduler.num_running() + scheduler.num_waiting() +
                                      scheduler.num_swapped()),
                  [this](const std::string& id) { return scheduler.contains(id); });
    local.num_running = scheduler.num_running();
    local.num_waiting = scheduler.num_waiting();
    local.kv_blocks_used = blocks.num_used();
    local.num_swapped = scheduler.num_swapped();
    local.num_swap_outs_total = scheduler.num_swap_outs_total();
    local.num_swap_ins_total = scheduler.num_swap_ins_total();
    local.num_swap_fallbacks_total = scheduler.num_swap_fallbacks_total();
    local.cpu_kv_blocks_used = host_blocks.num_used();
    local.prefix_cache_queries_total = scheduler.prefix_cache_queries();
    local.prefix_cache_hits_total = scheduler.prefix_cache_hits();
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      published = local;
    }
    logger.maybe_log(local);
  }

  void loop() {
    while (!stop_requested.load(std::memory_order_acquire)) {
      const uint64_t seen = queue.epoch();
      bool did = false;
      try {
        did = step();
      } catch (const std::exception& e) {
        spdlog::error("engine step failed: {}; aborting every request", e.what());
        fail_all(e.what());
        did = true;
      }
      if (!did && !stop_requested.load(std::memory_order_acquire)) queue.wait_for_change(seen);
    }
  }

  // Aborts everything queued or scheduled. Shutdown (error ""): requests
  // still in the queue were accepted like the running ones, so they are
  // admitted and end the same way, with an "abort" delta per choice. A
  // failed step (error set): queued requests get that error.
  void fail_all(const std::string& error) {
    if (error.empty()) {
      drain();
    } else {
      while (auto cmd = queue.pop())
        if (cmd->kind == Command::Kind::kAdd) {
          ++waiting_accounted;
          push_error(*cmd->request, error);
        }
    }
    local.requests_finished_total["abort"] += scheduler.abort_all();
    outputs.abort_all();
    publish();
  }

  EngineConfig config;
  std::unique_ptr<ModelExecutor> executor;
  std::shared_ptr<const Tokenizer> tokenizer;
  BlockManager blocks;
  HostBlockPool host_blocks;  // the swap space's blocks (before the scheduler: it outlives it)
  Scheduler scheduler;
  OutputProcessor outputs{*tokenizer};
  ModelRunner runner;
  StatsLogger logger;
  RequestQueue queue;

  std::thread thread;
  std::atomic<bool> stop_requested{false};
  // Admission (try_add_requests): requests counted as waiting. Network
  // threads add; the engine thread subtracts (settle_waiting).
  std::atomic<int64_t> waiting_count{0};
  int64_t waiting_accounted = 0;            // engine thread: its share of waiting_count
  std::vector<std::string> pending_aborts;  // drain(): gathered abort ids
  std::unordered_set<std::string> pending_abort_ids;
  // Heartbeat (steady_clock ticks; step_began 0 = not in a step).
  std::atomic<int64_t> step_began_ticks{0};
  std::atomic<int64_t> last_step_end_ticks{ticks(std::chrono::steady_clock::now())};
  std::atomic<bool> has_work{false};
  uint64_t global_seed = config.seed;  // declared after config
  uint64_t request_counter = 0;

  std::vector<float> logits;
  std::vector<TokenLogprob> sampled;
  std::vector<int32_t> suppress;
  LatencyTracker latency;
  // This step's sampling sequences, copied before postprocess retires
  // finished ones.
  struct TimedToken {
    std::string request_id;
    int seq_index = 0;
    std::chrono::steady_clock::time_point arrival;
    int64_t num_prompt_tokens = 0;
    std::string external_request_id;  // filled for --enable-log-requests only
  };
  std::vector<TimedToken> timed;
  EngineStats local;  // engine thread's
  mutable std::mutex stats_mu;
  EngineStats published;
};

Engine::Engine(EngineConfig config, std::unique_ptr<ModelExecutor> executor,
               std::shared_ptr<const Tokenizer> tokenizer) {
  if (!executor) throw std::invalid_argument("Engine: no ModelExecutor");
  if (!tokenizer) throw std::invalid_argument("Engine: no Tokenizer");
  impl_ = std::make_unique<EngineImpl>(std::move(config), std::move(executor), std::move(tokenizer));
}

Engine::~Engine() {
  stop();
  impl_->fail_all("");
}

void Engine::start() {
  if (impl_->thread.joinable()) return;
  impl_->stop_requested.store(false);
  impl_->thread = std::thread([this] { impl_->loop(); });
}

void Engine::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->stop_requested.store(true, std::memory_order_release);
  impl_->queue.wake();
  impl_->thread.join();
  impl_->fail_all("");
}

void Engine::add_request(std::unique_ptr<GenerateRequest> request) {
  impl_->waiting_count.fetch_add(1, std::memory_order_acq_rel);
  impl_->enqueue(std::move(request));
}

Admission Engine::try_add_requests(std::vector<std::unique_ptr<GenerateRequest>>& requests) {
  const int64_t limit = impl_->config.max_num_waiting_requests;
  const auto k = static_cast<int64_t>(requests.size());
  if (limit > 0) {
    if (k > limit) return Admission::kTooLarge;
    int64_t cur = impl_->waiting_count.load(std::memory_order_acquire);
    do {
      if (cur + k > limit) return Admission::kQueueFull;
    } while (!impl_->waiting_count.compare_exchange_weak(cur, cur + k, std::memory_order_acq_rel));
  } else {
    impl_->waiting_count.fetch_add(k, std::memory_order_acq_rel);
  }
  for (auto& r : requests) impl_->enqueue(std::move(r));
  return Admission::kAccepted;
}

void Engine::abort_request(const std::string& request_id) { abort_requests({request_id}); }

void Engine::abort_requests(std::vector<std::string> request_ids) {
  if (request_ids.empty()) return;
  auto cmd = std::make_unique<Command>();
  cmd->kind = Command::Kind::kAbort;
  cmd->request_ids = std::move(request_ids);
  impl_->queue.push(std::move(cmd));
}

bool Engine::step() { return impl_->step(); }

void Engine::run_until_idle() {
  while (!impl_->queue.empty() || impl_->scheduler.has_unfinished()) impl_->step();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->published;
}

EngineHeartbeat Engine::heartbeat() const {
  using Clock = std::chrono::steady_clock;
  EngineHeartbeat h;
  h.last_step_end = Clock::time_point(
      Clock::duration(impl_->last_step_end_ticks.load(std::memory_order_acquire)));
  if (int64_t b = impl_->step_began_ticks.load(std::memory_order_acquire))
    h.step_began = Clock::time_point(Clock::duration(b));
  h.has_work = impl_->has_work.load(std::memory_order_acquire);
  h.num_waiting = impl_->waiting_count.load(std::memory_order_acquire);
  return h;
}

bool Engine::idle() const {
  return impl_->queue.empty() && impl_->step_began_ticks.load(std::memory_order_acquire) == 0 &&
         !impl_->has_work.load(std::memory_order_acquire);
}

const EngineConfig& Engine::config() const { return impl_->config; }
int64_t Engine::num_kv_blocks() const { return impl_->blocks.num_blocks(); }
int64_t Engine::block_size() const { return impl_->blocks.block_size(); }

}  // namespace pagoda
