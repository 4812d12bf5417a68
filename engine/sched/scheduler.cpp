#include "engine/sched/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace pagoda {

int64_t SchedulerOutput::num_samples() const {
  int64_t n = 0;
  for (const ScheduledSeq& s : seqs) n += s.samples ? 1 : 0;
  return n;
}

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks, HostBlockPool* host)
    : config_(std::move(config)), blocks_(blocks), host_(host) {
  stop_config_.max_model_len = config_.max_model_len;
  stop_config_.eos_token_ids = config_.eos_token_ids;
}

Scheduler::~Scheduler() {
  for (int32_t b : pinned_) blocks_.release_pinned(b);
  for (auto& [id, g] : groups_)
    for (auto& seq : g->seqs) {
      blocks_.free(seq->block_table);
      if (host_) host_->free(seq->host_table);
    }
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  auto g = std::make_unique<SequenceGroup>();
  g->request_id = seq->request_id;
  g->seqs.push_back(std::move(seq));
  add_group(std::move(g));
}

void Scheduler::add_group(std::unique_ptr<SequenceGroup> g) {
  if (contains(g->request_id))
    throw std::invalid_argument("request id '" + g->request_id + "' is already in use");
  if (g->n < 1 || g->best_of < g->n || static_cast<int>(g->seqs.size()) != g->best_of)
    throw std::invalid_argument("Scheduler::add_group: malformed group '" + g->request_id + "'");
  for (int i = 0; i < g->best_of; ++i) {
    Sequence& s = *g->seqs[static_cast<size_t>(i)];
    if (s.index != i || s.request_id != g->request_id)
      throw std::invalid_argument("Scheduler::add_group: sequence " + std::to_string(i) + " of '" +
                                  g->request_id + "' has the wrong index or id");
    s.group = g.get();
    s.status = SequenceStatus::kWaiting;
  }
  g->num_finished = 0;
  g->started = false;
  ++num_unstarted_;
  for (auto& s : g->seqs) waiting_.push_back(s.get());
  std::string id = g->request_id;
  groups_.emplace(std::move(id), std::move(g));
}

void Scheduler::release_out_of_window(Sequence* seq) {
  const int64_t w = config_.sliding_window;
  if (w <= 0) return;
  const int64_t bs = blocks_.block_size();
  // The next query is at position num_computed_tokens.
  int64_t drop = first_block_in_window(seq->num_computed_tokens, w, bs);
  drop = std::min(drop, seq->num_computed_tokens / bs - 1);  // keep the last full block
  if (blocks_.caching()) drop = std::min(drop, seq->num_cached_blocks - 1);
  drop = std::min(drop, static_cast<int64_t>(seq->block_table.size()));
  for (int64_t k = seq->num_window_released; k < drop; ++k) {
    BlockTable one{seq->block_table[static_cast<size_t>(k)]};
    blocks_.free(one);
    seq->block_table[static_cast<size_t>(k)] = kNoBlock;
  }
  seq->num_window_released = std::max(seq->num_window_released, drop);
}

void Scheduler::allocate(Sequence* seq, int64_t need) {
  blocks_.allocate(seq->block_table, need);
  blocks_.cache_full_blocks(seq->block_table, seq->token_ids, need, &seq->num_cached_blocks,
                            &recorded_, seq->cache_root);
}

namespace {

// The sequence scores its request's prompt logprobs (seqs[0] only).
bool scores_prompt(const Sequence* seq) { return seq->sampling.prompt_logprobs && seq->index == 0; }

}  // namespace

void Scheduler::retire(Sequence* seq, std::vector<SequenceUpdate>* updates) {
  SequenceGroup& g = *seq->group;
  release_blocks(seq);
  ++g.num_finished;
  if (updates) updates->push_back(sequence_update(*seq));
  if (g.num_finished == g.best_of) done_.push_back(g.request_id);
}

std::vector<SequenceUpdate> Scheduler::stop(const std::string& request_id, int index) {
  std::vector<SequenceUpdate> updates;
  auto it = groups_.find(request_id);
  if (it == groups_.end() || index < 0 || index >= it->second->best_of) return updates;
  Sequence* seq = it->second->seqs[static_cast<size_t>(index)].get();
  if (seq->finished()) return updates;
  finish_sequence(*seq, FinishReason::kStop);
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  std::erase(swapped_, seq);
  retire(seq, &updates);
  reap();
  return updates;
}

void Scheduler::reap() {
  for (const std::string& id : done_) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    if (!it->second->started) --num_unstarted_;
    groups_.erase(it);
  }
  done_.clear();
}

bool Scheduler::abort(const std::string& request_id) {
  return abort(std::span<const std::string>(&request_id, 1)) > 0;
}

int64_t Scheduler::abort(std::span<const std::string> request_ids) {
  int64_t aborted = 0;
  for (const std::string& id : request_ids) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    SequenceGroup& g = *it->second;
    bool any = false;
    for (auto& s : g.seqs) {
      Sequence* seq = s.get();
      if (seq->finished()) continue;
      // Marked finished here; it leaves waiting_ / running_ below, before
      // reap() frees it.
      finish_sequence(*seq, FinishReason::kAbort);
      retire(seq, nullptr);
      any = true;
    }
    aborted += any ? 1 : 0;
  }
  if (aborted > 0) {
    std::erase_if(waiting_, [](const Sequence* s) { return s->finished(); });
    std::erase_if(running_, [](const Sequence* s) { return s->finished(); });
    std::erase_if(swapped_, [](const Sequence* s) { return s->finished(); });
  }
  reap();
  return aborted;
}

int64_t Scheduler::abort_all() {
  std::vector<std::string> ids;
  ids.reserve(groups_.size());
  for (auto& [id, g] : groups_) ids.push_back(id);
  return abort(std::span<const std::string>(ids));
}

void Scheduler::release_blocks(Sequence* seq) {
  blocks_.cache_partial_block(seq->block_table, seq->token_ids, seq->num_computed_tokens,
                              seq->cache_root);
  blocks_.free(seq->block_table);
  if (host_) host_->free(seq->host_table);
  seq->num_cached_blocks = 0;
  seq->num_window_released = 0;
  seq->num_computed_tokens = 0;
}

PreemptionMode Scheduler::mode_for(const Sequence* seq) const {
  // vLLM v0's SequenceGroup.get_max_num_running_seqs: the unfinished
  // sequences of the request.
  const SequenceGroup& g = *seq->group;
  return g.best_of - g.num_finished > 1 ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out) {
  ++num_preemptions_total_;
  const PreemptionMode mode = config_.preemption_mode.value_or(mode_for(seq));
  if (mode == PreemptionMode::kSwap && host_ && blocks_.blocks_for(seq->num_computed_tokens) > 0 &&
      seq->num_window_released == 0) {
    if (swap_out(seq, out)) {
      warn_preemption(*seq, PreemptionMode::kSwap);
      return;
    }
    ++num_swap_fallbacks_total_;
    if (!warned_swap_fallback_) {
      warned_swap_fallback_ = true;
      spdlog::warn(
          "Preemption by swap: the host KV pool (--swap-space, {} blocks, {} free) cannot hold "
          "the {} blocks of a preempted sequence; preempting it by recompute instead (logged "
          "once; raise --swap-space to swap more)",
          host_->num_blocks(), host_->num_free(), blocks_.blocks_for(seq->num_computed_tokens));
    }
  }
  warn_preemption(*seq, PreemptionMode::kRecompute);
  release_blocks(seq);
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_front(seq);
}

void Scheduler::warn_preemption(const Sequence& seq, PreemptionMode mode) const {
  if (num_preemptions_total_ % 50 != 1) return;
  spdlog::warn(
      "Request {} preempted by {} for lack of KV cache blocks ({} preemption(s) so far; logged "
      "every "
      "50th, as vLLM v0). End-to-end latency suffers: raise --gpu-memory-utilization or "
      "--tensor-parallel-size, or lower --max-num-seqs",
      seq.request_id, mode == PreemptionMode::kSwap ? "swap" : "recompute", num_preemptions_total_);
}

bool Scheduler::swap_out(Sequence* seq, SchedulerOutput& out) {
  const int64_t h = blocks_.blocks_for(seq->num_computed_tokens);
  if (!host_->can_allocate(h) || static_cast<int64_t>(seq->block_table.size()) < h) return false;
  seq->host_table = host_->allocate(h);
  for (size_t k = 0; k < static_cast<size_t>(h); ++k)
    out.swap_out.push_back({seq->block_table[k], seq->host_table[k]});
  blocks_.free(seq->block_table);  // as release_blocks, keeping the computed tokens
  seq->num_cached_blocks = 0;
  seq->status = SequenceStatus::kSwapped;
  swapped_.insert(swapped_.begin() + static_cast<std::ptrdiff_t>(swapped_insert_), seq);
  ++out.num_swapped_out;
  ++num_swap_outs_total_;
  return true;
}

bool Scheduler::swap_in(Sequence* seq, int64_t n, SchedulerOutput& out) {
  const int64_t bs = blocks_.block_size();
  const int64_t computed = seq->num_computed_tokens;
  // Computed full blocks still cached on the device need no copy.
  if (blocks_.caching())
    blocks_.acquire_cached_prefix(seq->token_ids, computed / bs, seq->block_table, seq->cache_root);
  const size_t hits = seq->block_table.size();
  if (!blocks_.can_allocate(seq->block_table, computed + n)) {
    blocks_.free(seq->block_table);
    return false;
  }
  blocks_.allocate(seq->block_table, computed + n);
  for (size_t k = hits; k < seq->host_table.size(); ++k)
    out.swap_in.push_back({seq->block_table[k], seq->host_table[k]});
  host_->free(seq->host_table);
  seq->num_cached_blocks = static_cast<int64_t>(hits);
  blocks_.cache_full_blocks(seq->block_table, seq->token_ids, computed, &seq->num_cached_blocks,
                            nullptr, seq->cache_root);
  seq->status = SequenceStatus::kRunning;
  ++out.num_swapped_in;
  ++num_swap_ins_total_;
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  // Pins of a step that never reached postprocess (its forward threw).
  for (int32_t b : pinned_) blocks_.release_pinned(b);
  pinned_.clear();
  // Records of a step that never reached postprocess: never computed.
  for (int32_t b : recorded_) blocks_.forget_record(b);
  recorded_.clear();
  swapped_insert_ = swapped_.size();
  int64_t budget = config_.max_num_batched_tokens;
  // Prompt positions whose logprobs are scored this step (their [rows,
  // vocab] logits are held at once): a prompt_logprobs prefill takes at most
  // what is left of it.
  int64_t scored_budget = config_.max_prompt_logprob_tokens;
  const auto cap_scored = [&](const Sequence* seq, int64_t n) {
    if (!scores_prompt(seq) || seq->num_computed_tokens >= seq->num_prompt_tokens) return n;
    const int64_t c = std::min(n, scored_budget);
    scored_budget -= c;
    return c;
  };

  // A sequence decodes when its prompt is done and one token is left to
  // compute (the last sampled one); anything else it computes is prefill.
  const auto is_decode = [](const Sequence* seq) {
    return seq->num_output_tokens() > 0 && seq->num_computed_tokens == seq->num_tokens() - 1;
  };
  // The prompt tokens this step may still take: max_prefill_tokens_with_decodes
  // when a running or swapped sequence decodes (a swapped one may come back
  // this step; if it does not, the cap only makes the step stricter). A
  // swapped prefill that finds it spent waits at the front of the swap
  // queue (FIFO, as the decodes behind it) until a later step.
  int64_t prefill_budget = std::numeric_limits<int64_t>::max();
  if (config_.max_prefill_tokens_with_decodes > 0 &&
      (std::any_of(running_.begin(), running_.end(), is_decode) ||
       std::any_of(swapped_.begin(), swapped_.end(), is_decode)))
    prefill_budget = config_.max_prefill_tokens_with_decodes;
  // A prefill longer than long_prefill_token_threshold goes in chunks of
  // that many (vLLM v1: before the step's budget is applied), and no
  // prefill chunk takes more than prefill_budget.
  const auto cap_long = [&](const Sequence* seq) {
    const int64_t left = seq->num_tokens() - seq->num_computed_tokens;
    const int64_t t = config_.long_prefill_token_threshold;
    const int64_t n = t > 0 ? std::min(left, t) : left;
    return is_decode(seq) ? n : std::min(n, prefill_budget);
  };
  // n tokens scheduled, a decode's or prefill.
  const auto charge = [&](bool decode, int64_t n) {
    budget -= n;
    if (!decode) prefill_budget -= n;
  };

  // 1. Running sequences: decodes and continuing prefill chunks.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    int64_t n = cap_scored(seq, std::min(cap_long(seq), budget));
    if (n == 0) {  // its next chunk waits for the next step
      ++i;
      continue;
    }
    release_out_of_window(seq);
    int64_t need = seq->num_computed_tokens + n;
    bool self_preempted = false;
    while (!blocks_.can_allocate(seq->block_table, need)) {
      if (running_.size() == 1) break;  // nobody else holds blocks
      Sequence* victim = running_.back();
      running_.pop_back();
      preempt(victim, out);
      ++out.num_preempted;
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    if (!blocks_.can_allocate(seq->block_table, need)) {
      // Alone and still out of blocks: the whole KV cache cannot hold this
      // sequence's next token. It ends as if capped by length.
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      finish_sequence(*seq, FinishReason::kLength);
      retire(seq, &out.finished);
      continue;
    }
    allocate(seq, need);
    bool samples = need == seq->num_tokens();
    const bool decoding = n == 1 && is_decode(seq);
    (decoding ? out.num_decode_tokens : out.num_prefill_tokens) += n;
    out.seqs.push_back({seq, n, samples});
    charge(decoding, n);
    ++i;
  }

  auto seats_taken = static_cast<int64_t>(running_.size());
  // 2. Swapped sequences, in swap-out order, unless this step had to
  // preempt (vLLM v0: no swap-in in a step that swaps out).
  while (out.num_preempted == 0 && budget > 0 && !swapped_.empty() &&
         seats_taken < config_.max_num_seqs) {
    Sequence* seq = swapped_.front();
    const int64_t computed = seq->num_computed_tokens;
    const int64_t n = cap_scored(seq, std::min(cap_long(seq), budget));
    const bool decoding = n == 1 && is_decode(seq);  // (before swap_in, as `computed`)
    if (n == 0 || !swap_in(seq, n, out)) break;
    swapped_.pop_front();
    running_.push_back(seq);
    ++seats_taken;
    (decoding ? out.num_decode_tokens : out.num_prefill_tokens) += n;
    out.seqs.push_back({seq, n, computed + n == seq->num_tokens()});
    charge(decoding, n);
  }

  // 3. Waiting sequences, FIFO, unless this step had to preempt or a
  // swapped sequence still waits for blocks (it resumes first).
  while (out.num_preempted == 0 && swapped_.empty() && budget > 0 && prefill_budget > 0 &&
         !waiting_.empty() && seats_taken < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    // Prefix caching: start from the longest cached run of its leading
    // full blocks, then of a partially filled block continuing them (all
    // but its last token at most: that one is computed). A partial hit is
    // pinned and copied into the sequence's own block before the step.
    int64_t hit = 0;
    int32_t partial_src = -1;
    const bool lookup = blocks_.caching() && seq->block_table.empty() &&
                        seq->num_computed_tokens == 0 && !scores_prompt(seq);
    if (lookup) {
      hit = blocks_.acquire_cached_prefix(seq->token_ids,
                                          (seq->num_tokens() - 1) / blocks_.block_size(),
                                          seq->block_table, seq->cache_root);
      seq->num_cached_blocks = hit / blocks_.block_size();
      hit += blocks_.acquire_cached_partial(seq->token_ids, seq->num_tokens() - 1, seq->block_table,
                                            &partial_src, seq->cache_root);
      seq->num_computed_tokens = hit;
    }
    const auto give_up = [&] {
      if (partial_src >= 0) blocks_.release_pinned(partial_src);
      if (lookup) release_blocks(seq);
    };
    int64_t n = cap_scored(seq, std::min(cap_long(seq), budget));
    if (n == 0) {
      give_up();
      break;
    }
    int64_t need = seq->num_computed_tokens + n;
    if (!blocks_.can_allocate(seq->block_table, need)) {  // waits for blocks
      give_up();
      break;
    }
    if (lookup) {
      prefix_cache_queries_ += seq->num_tokens();
      prefix_cache_hits_ += hit;
    }
    allocate(seq, need);
    if (partial_src >= 0) {
      out.block_copies.push_back(
          {partial_src, seq->block_table[static_cast<size_t>(hit / blocks_.block_size())]});
      pinned_.push_back(partial_src);
    }
    if (seq->num_cached_tokens < 0) seq->num_cached_tokens = hit;
    waiting_.pop_front();
    if (!seq->group->started) {
      seq->group->started = true;
      --num_unstarted_;
    }
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    ++seats_taken;
    out.num_prefill_tokens += n;
    out.seqs.push_back({seq, n, need == seq->num_tokens()});
    charge(false, n);
  }
  reap();
  return out;
}

void Scheduler::append(Sequence* seq, const TokenLogprob& t, PostprocessResult* res) {
  const bool done = append_token(*seq, t.token_id, stop_config_);
  ++res->num_generated;
  SequenceUpdate& u = res->updates.emplace_back(token_update(*seq, t));
  SequenceGroup& g = *seq->group;
  if (scores_prompt(seq) && !g.prompt_logprobs_reported) {
    // Complete once it sampled (its prefill scored every position).
    const int64_t positions = std::max<int64_t>(seq->num_prompt_tokens - 1, 0);
    if (static_cast<int64_t>(seq->prompt_logprobs.size()) == positions) {
      u.prompt_logprobs = seq->prompt_logprobs;
      g.prompt_logprobs_reported = true;
    }
  }
  if (done) {
    std::erase(running_, seq);
    retire(seq, nullptr);  // its finish is in u
  }
}

PostprocessResult Scheduler::postprocess(const SchedulerOutput& out,
                                         std::span<const TokenLogprob> sampled) {
  PostprocessResult res;
  if (static_cast<int64_t>(sampled.size()) != out.num_samples())
    throw std::logic_error("Scheduler::postprocess: sampled token count mismatch");
  recorded_.clear();  // the step computed what schedule() recorded
  // The step's copies have run: their sources are free to go again.
  for (const BlockCopy& c : out.block_copies) {
    blocks_.release_pinned(c.src);
    auto it = std::find(pinned_.begin(), pinned_.end(), c.src);
    if (it == pinned_.end())
      throw std::logic_error("Scheduler::postprocess: copy source not pinned");
    pinned_.erase(it);
  }
  size_t k = 0;
  for (const ScheduledSeq& s : out.seqs) {
    Sequence* seq = s.seq;
    seq->num_computed_tokens += s.num_new_tokens;
    blocks_.cache_full_blocks(seq->block_table, seq->token_ids, seq->num_computed_tokens,
                              &seq->num_cached_blocks, nullptr, seq->cache_root);
    if (!s.samples) continue;
    append(seq, sampled[k++], &res);
  }
  reap();
  return res;
}

PostprocessResult Scheduler::postprocess(const SchedulerOutput& out,
                                         std::span<const int32_t> sampled) {
  std::vector<TokenLogprob> t(sampled.size());
  for (size_t i = 0; i < sampled.size(); ++i) t[i].token_id = sampled[i];
  return postprocess(out, std::span<const TokenLogprob>(t));
}

void Scheduler::check_invariants() const {
  blocks_.check_invariants();
  const auto fail = [](const std::string& what) { throw std::logic_error("Scheduler: " + what); };
  const int64_t bs = blocks_.block_size();
  std::vector<int32_t> refs(static_cast<size_t>(blocks_.num_blocks()), 0);
  for (int32_t b : pinned_) refs[static_cast<size_t>(b)]++;  // partial-hit copy sources
  if (host_) host_->check_invariants();
  int64_t swapped = 0, host_held = 0;
  for (const auto& [id, g] : groups_)
    for (const auto& s : g->seqs) {
      const Sequence& q = *s;
      const std::string who = id + "#" + std::to_string(q.index);
      for (size_t k = 0; k < q.block_table.size(); ++k) {
        const int32_t b = q.block_table[k];
        if ((b == kNoBlock) != (static_cast<int64_t>(k) < q.num_window_released))
          fail(who + "'s table entry " + std::to_string(k) + " is " +
               (b == kNoBlock ? "released past" : "held within") + " its released prefix");
        if (b != kNoBlock) refs[static_cast<size_t>(b)]++;
      }
      if (q.status != SequenceStatus::kRunning && !q.block_table.empty())
        fail(who + " holds blocks while not running");
      if (q.status == SequenceStatus::kSwapped) {
        if (static_cast<int64_t>(q.host_table.size()) !=
                blocks_.blocks_for(q.num_computed_tokens) ||
            q.host_table.empty())
          fail(who + " is swapped without a host block per computed block");
        ++swapped;
      } else if (!q.host_table.empty()) {
        fail(who + " holds host blocks while not swapped");
      }
      for (int32_t b : q.host_table) {
        if (!host_ || b < 0 || b >= host_->num_blocks() || !host_->in_use(b))
          fail(who + " holds host block " + std::to_string(b) + " not in use");
        ++host_held;
      }
      if (q.status == SequenceStatus::kRunning &&
          (q.num_computed_tokens > q.num_tokens() ||
           static_cast<int64_t>(q.block_table.size()) < blocks_.blocks_for(q.num_computed_tokens)))
        fail(who + "'s table does not cover its computed tokens");
      if (q.num_cached_blocks > static_cast<int64_t>(q.block_table.size()))
        fail(who + " records more blocks than it holds");
      for (int64_t k = q.num_window_released; k < q.num_cached_blocks && blocks_.caching(); ++k)
        if (!blocks_.block_holds(
                q.block_table[static_cast<size_t>(k)],
                std::span<const int32_t>(q.token_ids)
                    .subspan(static_cast<size_t>(k * bs), static_cast<size_t>(bs))))
          fail(who + "'s block " + std::to_string(k) + " is not recorded with its tokens");
    }
  if (swapped != num_swapped())
    fail(std::to_string(swapped) + " sequences swapped but " + std::to_string(num_swapped()) +
         " in the swapped queue");
  if (host_ && host_held != host_->num_used())
    fail(std::to_string(host_->num_used()) + " host blocks in use but " +
         std::to_string(host_held) + " held (host blocks are never shared)");
  for (int64_t b = 0; b < blocks_.num_blocks(); ++b)
    if (refs[static_cast<size_t>(b)] != blocks_.ref_count(static_cast<int32_t>(b)))
      fail("block " + std::to_string(b) + " has " +
           std::to_string(blocks_.ref_count(static_cast<int32_t>(b))) + " references but " +
           std::to_string(refs[static_cast<size_t>(b)]) + " tables hold it");
}

}  // namespace pagoda
