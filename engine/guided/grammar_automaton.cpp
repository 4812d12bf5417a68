#include "engine/guided/grammar_automaton.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace pagoda::guided {
namespace {

// Thrown inside the automaton when a bound is exceeded; caught at its API.
struct Overflow : std::length_error {
  using std::length_error::length_error;
};

uint64_t key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

bool has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1u; }

}  // namespace

void GrammarAutomaton::note_overflow(const char* what) const {
  if (!overflowed_.exchange(true))
    spdlog::error(
        "guided_grammar: the grammar's parser exceeded its bounds ({}); outputs that need more "
        "end there (finish_reason 'stop')",
        what);
}

size_t GrammarAutomaton::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
  for (int32_t x : v) {
    h ^= static_cast<uint32_t>(x);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

GrammarAutomaton::GrammarAutomaton(const BnfGrammar& g) : sets_(g.bytesets) {
  rule_first_items_.resize(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const auto& alt : g.rules[r].alts) {
      rule_first_items_[r].push_back(static_cast<int32_t>(item_rule_.size()));
      for (const auto& s : alt) {
        item_rule_.push_back(s.rule);
        item_set_.push_back(s.rule >= 0 ? -1 : s.byteset);
      }
      item_rule_.push_back(-1);  // completed
      item_set_.push_back(-1);
    }
  std::lock_guard<std::mutex> lock(mu_);
  try {
    scratch_.out.clear();
    scratch_.visited.clear();
    for (int32_t first : rule_first_items_[static_cast<size_t>(g.root)])
      expand(first, -1, scratch_);
    auto& out = scratch_.out;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    start_ = intern(out);
  } catch (const Overflow& e) {
    throw GrammarError(fmt::format("grammar is too ambiguous to compile: {}", e.what()));
  }
}

int32_t GrammarAutomaton::node(int32_t item, int32_t parent) const {
  auto [it, fresh] = node_index_.emplace(key(item, parent), static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    if (nodes_.size() >= kMaxGrammarNodes) {
      node_index_.erase(it);
      throw Overflow(fmt::format("over {} parser stack nodes", kMaxGrammarNodes));
    }
    nodes_.emplace_back(item, parent);
  }
  return it->second;
}

void GrammarAutomaton::expand(int32_t item, int32_t parent, Scratch& sc) const {
  if (!sc.visited.insert(key(item, parent)).second) return;
  const auto i = static_cast<size_t>(item);
  if (item_set_[i] >= 0) {  // before a terminal: a stack top
    sc.out.push_back(node(item, parent));
    if (sc.out.size() > kMaxGrammarStacks)
      throw Overflow(fmt::format("over {} parser stacks at once", kMaxGrammarStacks));
    return;
  }
  const int32_t r = item_rule_[i];
  if (r < 0) {  // completed: pop to the return address
    if (parent < 0) {
      sc.out.push_back(kAccept);
      return;
    }
    const auto [ret, up] = nodes_[static_cast<size_t>(parent)];
    expand(ret, up, sc);
    return;
  }
  // Push r's alternatives; the return address is the next item unless
  // that one is the completed item (tail position: return straight to parent).
  const bool tail = item_rule_[i + 1] < 0 && item_set_[i + 1] < 0;
  const int32_t ret = tail ? parent : node(item + 1, parent);
  for (int32_t first : rule_first_items_[static_cast<size_t>(r)]) expand(first, ret, sc);
}

void GrammarAutomaton::step(const std::vector<int32_t>& cfg, uint8_t b, Scratch& sc) const {
  sc.out.clear();
  sc.visited.clear();
  for (int32_t n : cfg) {
    if (n == kAccept) continue;
    const auto [item, parent] = nodes_[static_cast<size_t>(n)];
    if (has(sets_[static_cast<size_t>(item_set_[static_cast<size_t>(item)])], b))
      expand(item + 1, parent, sc);
  }
  std::sort(sc.out.begin(), sc.out.end());
  sc.out.erase(std::unique(sc.out.begin(), sc.out.end()), sc.out.end());
}

int32_t GrammarAutomaton::intern(const std::vector<int32_t>& cfg) const {
  auto it = state_index_.find(cfg);
  if (it != state_index_.end()) return it->second;
  if (states_.size() >= kMaxGrammarStates)
    throw Overflow(fmt::format("over {} parser states", kMaxGrammarStates));
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(cfg);
  state_index_.emplace(cfg, id);
  return id;
}

int32_t GrammarAutomaton::walk(int32_t state, std::string_view bytes) const {
  if (state < 0) return kDeadState;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<size_t>(state) >= states_.size()) return kDeadState;
  if (bytes.empty()) return state;
  try {
    std::vector<int32_t> cfg = states_[static_cast<size_t>(state)];
    for (char c : bytes) {
      step(cfg, static_cast<uint8_t>(c), scratch_);
      if (scratch_.out.empty()) return kDeadState;
      cfg.swap(scratch_.out);
    }
    return intern(cfg);
  } catch (const Overflow& e) {
    note_overflow(e.what());
    return kDeadState;
  }
}

bool GrammarAutomaton::accepting(int32_t state) const {
  if (state < 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<size_t>(state) >= states_.size()) return false;
  const auto& cfg = states_[static_cast<size_t>(state)];
  return !cfg.empty() && cfg.front() == kAccept;  // sorted: kAccept (< 0) first
}

size_t GrammarAutomaton::num_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_.size();
}

int64_t GrammarAutomaton::allowed_tokens(int32_t state, const TokenVocab& vocab,
                                         std::vector<uint64_t>& words) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state < 0 || static_cast<size_t>(state) >= states_.size()) return 0;
  int64_t count = 0;
  const auto& nodes = vocab.nodes();
  // Depth-first walk of the trie with the parser's configuration after the
  // trie node's bytes (not interned: only advance() interns states).
  struct Frame {
    int32_t trie;
    std::vector<int32_t> cfg;
  };
  std::vector<Frame> stack;
  stack.push_back({0, states_[static_cast<size_t>(state)]});
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    for (int32_t c = nodes[static_cast<size_t>(f.trie)].first_child; c >= 0;
         c = nodes[static_cast<size_t>(c)].next_sibling) {
      const auto& child = nodes[static_cast<size_t>(c)];
      try {
        step(f.cfg, child.byte, scratch_);
      } catch (const Overflow& e) {
        note_overflow(e.what());
        continue;
      }
      if (scratch_.out.empty()) continue;
      for (int32_t id = child.first_token; id >= 0; id = vocab.token_next(id)) {
        words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        ++count;
      }
      if (child.first_child >= 0) stack.push_back({c, scratch_.out});
    }
  }
  return count;
}

}  // namespace pagoda::guided
