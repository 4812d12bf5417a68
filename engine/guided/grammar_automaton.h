// GrammarAutomaton: a byte-level pushdown recogniser of a BnfGrammar
// (ebnf_grammar.h), for guided_grammar. A parser configuration is the set
// of the parser's possible stacks after the bytes so far (a nondeterministic
// top-down parser run breadth-first over all alternatives, as in GLL
// parsing / Tomita's graph-structured stack, without its sharing of
// stack tops); configurations are interned into int32 state ids so the
// Guide caches token masks per state exactly as for a DFA.
//
// A stack is a linked list of nodes (item, parent), each node interned
// once in a table owned by the automaton; an item is a rule alternative with
// a dot position. The top item of every stack in a configuration has its
// dot before a terminal (a byte set); the other nodes are return addresses
// (the item to continue when the rule above completes). A configuration
// is the sorted set of its stacks' top nodes, plus kAccept when root can
// end there. On a byte, the stacks whose terminal holds it advance their
// dot and are closed again (a completed rule pops to its return address; a
// nonterminal pushes its alternatives; a rule in tail position does not
// push a return address, so x* and right recursion keep stacks flat).
// Left recursion would expand forever and is rejected when the grammar
// is compiled; unproductive alternatives were removed, so every stack in a
// configuration can still complete: a live state can always reach
// acceptance.
//
// Bounds: kMaxGrammarStates interned configurations, kMaxGrammarNodes
// stack nodes, kMaxGrammarStacks stacks in one configuration (a very
// ambiguous grammar). A walk that would exceed them is refused: walk()
// returns kDeadState (the output ends with "stop") and allowed_tokens()
// prunes that branch; the first time, an error is logged, and
// overflowed() reports it.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/guided/automaton.h"
#include "engine/guided/ebnf_grammar.h"

namespace pagoda::guided {

inline constexpr size_t kMaxGrammarStates = 100'000;
inline constexpr size_t kMaxGrammarNodes = 4'000'000;
inline constexpr size_t kMaxGrammarStacks = 10'000;

class GrammarAutomaton final : public Automaton {
 public:
  // Builds the start configuration. Throws GrammarError when even that
  // exceeds the bounds.
  explicit GrammarAutomaton(const BnfGrammar& g);

  int32_t start() const override { return start_; }
  int32_t walk(int32_t state, std::string_view bytes) const override;
  bool accepting(int32_t state) const override;
  int64_t allowed_tokens(int32_t state, const TokenVocab& vocab,
                         std::vector<uint64_t>& words) const override;
  int64_t max_output_bytes() const override { return -1; }
  size_t num_states() const override;
  // True once some walk was refused for exceeding the bounds above.
  bool overflowed() const { return overflowed_.load(); }

 private:
  static constexpr int32_t kAccept = -2;  // in a configuration: root can end here
  struct Scratch {
    std::vector<int32_t> out;
    std::unordered_set<uint64_t> visited;
  };
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  void note_overflow(const char* what) const;
  // All below: mu_ held.
  int32_t node(int32_t item, int32_t parent) const;
  void expand(int32_t item, int32_t parent, Scratch& sc) const;
  // Configuration after byte b from `cfg` into sc.out (sorted, unique).
  void step(const std::vector<int32_t>& cfg, uint8_t b, Scratch& sc) const;
  int32_t intern(const std::vector<int32_t>& cfg) const;

  // Items: per alternative, one per dot position (the last: completed).
  std::vector<int32_t> item_rule_;                      // the nonterminal after the dot, else -1
  std::vector<int32_t> item_set_;                       // the terminal after the dot, else -1
  std::vector<std::vector<int32_t>> rule_first_items_;  // per rule: its alternatives' first items
  std::vector<ByteSet> sets_;
  int32_t start_ = 0;

  mutable std::mutex mu_;
  mutable std::vector<std::pair<int32_t, int32_t>> nodes_;  // (item, parent node or -1)
  mutable std::unordered_map<uint64_t, int32_t> node_index_;
  mutable std::vector<std::vector<int32_t>> states_;
  mutable std::unordered_map<std::vector<int32_t>, int32_t, VecHash> state_index_;
  mutable Scratch scratch_;
  mutable std::atomic<bool> overflowed_{false};
};

}  // namespace pagoda::guided
