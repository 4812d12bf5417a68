#include "engine/sched/scheduler.h"

#include <algorithm>
#include <stdexcept>

namespace pagoda {

int64_t SchedulerOutput::num_samples() const {
  int64_t n = 0;
  for (const ScheduledSeq& s : seqs) n += s.samples ? 1 : 0;
  return n;
}

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks)
    : config_(std::move(config)), blocks_(blocks) {
  stop_config_.max_model_len = config_.max_model_len;
  stop_config_.eos_token_ids = config_.eos_token_ids;
}

Scheduler::~Scheduler() {
  for (auto& [id, seq] : seqs_) blocks_.free(seq->block_table);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  if (contains(seq->request_id))
    throw std::invalid_argument("request id '" + seq->request_id + "' is already in use");
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq.get());
  std::string id = seq->request_id;
  seqs_.emplace(std::move(id), std::move(seq));
}

void Scheduler::retire(Sequence* seq) {
  blocks_.free(seq->block_table);
  if (seq->output) seq->output->push(make_delta(*seq));
  seqs_.erase(seq->request_id);
}

bool Scheduler::abort(const std::string& request_id) {
  auto it = seqs_.find(request_id);
  if (it == seqs_.end()) return false;
  Sequence* seq = it->second.get();
  std::erase(waiting_, seq);
  std::erase(running_, seq);
  finish_sequence(*seq, FinishReason::kAbort);
  retire(seq);
  return true;
}

int64_t Scheduler::abort_all() {
  std::vector<std::string> ids;
  for (auto& [id, seq] : seqs_) ids.push_back(id);
  for (const std::string& id : ids) abort(id);
  return static_cast<int64_t>(ids.size());
}

void Scheduler::preempt(Sequence* seq) {
  blocks_.free(seq->block_table);
  seq->num_computed_tokens = 0;
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_front(seq);
  ++num_preemptions_total_;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;

  // 1. Running sequences: decodes and continuing prefill chunks.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    int64_t n = std::min(seq->num_tokens() - seq->num_computed_tokens, budget);
    int64_t need = seq->num_computed_tokens + n;
    bool self_preempted = false;
    while (!blocks_.can_allocate(seq->block_table, need)) {
      if (running_.size() == 1) break;  // nobody else holds blocks
      Sequence* victim = running_.back();
      running_.pop_back();
      preempt(victim);
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
      retire(seq);
      ++out.num_finished_by_capacity;
      continue;
    }
    blocks_.allocate(seq->block_table, need);
    bool samples = need == seq->num_tokens();
    bool decoding = n == 1 && seq->num_output_tokens() > 0 &&
                    seq->num_computed_tokens == seq->num_tokens() - 1;
    (decoding ? out.num_decode_tokens : out.num_prefill_tokens) += n;
    out.seqs.push_back({seq, n, samples});
    budget -= n;
    ++i;
  }

  // 2. Waiting sequences, FIFO, unless this step had to preempt.
  while (out.num_preempted == 0 && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    int64_t n = std::min(seq->num_tokens() - seq->num_computed_tokens, budget);
    int64_t need = seq->num_computed_tokens + n;
    if (!blocks_.can_allocate(seq->block_table, need)) break;  // waits for blocks
    blocks_.allocate(seq->block_table, need);
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    out.num_prefill_tokens += n;
    out.seqs.push_back({seq, n, need == seq->num_tokens()});
    budget -= n;
  }
  return out;
}

PostprocessResult Scheduler::postprocess(const SchedulerOutput& out,
                                         std::span<const int32_t> sampled) {
  PostprocessResult res;
  if (static_cast<int64_t>(sampled.size()) != out.num_samples())
    throw std::logic_error("Scheduler::postprocess: sampled token count mismatch");
  size_t k = 0;
  for (const ScheduledSeq& s : out.seqs) {
    Sequence* seq = s.seq;
    seq->num_computed_tokens += s.num_new_tokens;
    if (!s.samples) continue;
    bool done = append_token(*seq, sampled[k++], stop_config_);
    ++res.num_generated;
    if (done) {
      res.finished.push_back(seq->finish_reason);
      std::erase(running_, seq);
      retire(seq);
    } else if (seq->output) {
      RequestOutput d = make_delta(*seq);
      seq->output->push(std::move(d));
    }
  }
  return res;
}

}  // namespace pagoda
