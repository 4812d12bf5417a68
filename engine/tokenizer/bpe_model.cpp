#include "engine/tokenizer/bpe_model.h"

#include <queue>
#include <stdexcept>

#include "engine/tokenizer/bpe_byte_level.h"

namespace pagoda::bpe {
namespace {

constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 65536;

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
  for (size_t b = 0; b < 256; ++b) {
    auto it = vocab_.find(byte_to_unicode()[b]);
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || ic == vocab_.end()) {
      throw std::runtime_error("BPE merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b +
                               "\") uses a token that is not in the vocabulary");
    }
    // A repeated pair takes its last rank, as HF's HashMap collect does.
    merges_.insert_or_assign(pair_key(ia->second, ib->second),
                        Merge{static_cast<int32_t>(rank), ic->second});
  }
}

std::vector<int32_t> BpeModel::merge_word(std::string_view word) const {
  if (ignore_merges_) {
    std::string mapped;
    for (char c : word) mapped += byte_to_unicode()[static_cast<unsigned char>(c)];
    if (auto it = vocab_.find(mapped); it != vocab_.end()) return {it->second};
  }
  // Symbols as a doubly linked list over a vector (HF word.rs).
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_id_[static_cast<unsigned char>(c)];
    if (id < 0) continue;
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, n + 1, true});
  }
  if (syms.empty()) return {};
  syms.back().next = -1;

  // Min-heap on (rank, position): the lowest rank first, leftmost on ties.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = syms[static_cast<size_t>(left)].next;
    if (right < 0) return;
    auto it = merges_.find(
        pair_key(syms[static_cast<size_t>(left)].id, syms[static_cast<size_t>(right)].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = syms[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = syms[static_cast<size_t>(left.next)];
    // Stale entry: the pair at this position changed since it was queued.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.rank != top.rank || it->second.new_id != top.new_id) {
      continue;
    }
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = top.pos;
    push_pair(left.prev);
    push_pair(top.pos);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    ids.push_back(syms[static_cast<size_t>(i)].id);
  }
  return ids;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) {
    const std::vector<int32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  const std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = merge_word(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

}  // namespace pagoda::bpe
