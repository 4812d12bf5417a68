// Automaton: the state machine behind a Guide (guide.h). States are int32
// ids (>= 0; kDeadState = -1 when the input left the language); what a
// state is depends on the implementation: a DFA state (DfaAutomaton,
// regex / choice / JSON schema) or an interned pushdown configuration
// (GrammarAutomaton, grammar_automaton.h). Implementations are
// thread-safe for concurrent const calls.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/guided/regex_dfa.h"
#include "engine/guided/token_vocab.h"

namespace pagoda::guided {

inline constexpr int32_t kDeadState = -1;

class Automaton {
 public:
  virtual ~Automaton() = default;
  virtual int32_t start() const = 0;
  // State after `bytes` from `state` (>= 0), or kDeadState when they leave
  // the language (no continuation of them can be accepted).
  virtual int32_t walk(int32_t state, std::string_view bytes) const = 0;
  // True when the output may end in `state`.
  virtual bool accepting(int32_t state) const = 0;
  // Sets in `words` (bit id % 64 of words[id / 64], sized for the
  // vocabulary, all zero on entry) the tokens whose whole byte string
  // `walk`s from `state` to a live state, by a depth-first walk of the
  // vocabulary's byte trie pruned where the automaton dies; returns how
  // many bits it set.
  virtual int64_t allowed_tokens(int32_t state, const TokenVocab& vocab,
                                 std::vector<uint64_t>& words) const = 0;
  // Most bytes an accepted output can have; -1 when unbounded or unknown.
  virtual int64_t max_output_bytes() const = 0;
  // States that exist so far (a DFA: all; a grammar: interned so far).
  virtual size_t num_states() const = 0;
};

// The DFA of a regex (regex_dfa.h) as an Automaton.
class DfaAutomaton final : public Automaton {
 public:
  explicit DfaAutomaton(ByteDfa dfa) : dfa_(std::move(dfa)) {}
  int32_t start() const override { return dfa_.start(); }
  int32_t walk(int32_t state, std::string_view bytes) const override {
    return dfa_.walk(state, bytes);
  }
  bool accepting(int32_t state) const override { return dfa_.accepting(state); }
  int64_t allowed_tokens(int32_t state, const TokenVocab& vocab,
                         std::vector<uint64_t>& words) const override;
  int64_t max_output_bytes() const override { return dfa_.max_match_length(); }
  size_t num_states() const override { return dfa_.num_states(); }

 private:
  ByteDfa dfa_;
};

}  // namespace pagoda::guided
