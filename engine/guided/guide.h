// Guide: a compiled output constraint (guided decoding, vLLM's structured
// outputs) over one tokenizer's vocabulary. Per request the engine keeps an
// automaton state (an int32_t); per step the guide yields the tokens allowed
// from it (a bitmask over token ids) and advances on the sampled token.
//
//   kind       spec                         compiled to
//   kRegex     a regex (regex_dfa.h syntax)  DFA over bytes
//   kChoice    a JSON array of strings       alternation of the literals
//   kJson      a JSON schema (text)          regex (json_schema_regex.h) -> DFA
//   kJsonObject (spec unused)                regex of any JSON object, nesting
//                                            bounded (json_schema_regex.h)
//   kGrammar   EBNF/GBNF text (ebnf_grammar.h) pushdown recogniser
//                                            (grammar_automaton.h)
//   kStructuralTag {structures, triggers}    DFA: trigger scanner + schemas
//              as JSON (structural_tag.h)    (structural_tag.h)
//
// The state machine is an Automaton (automaton.h): a DFA for the regular
// kinds, interned parser configurations for kGrammar; either way a state
// is an int32_t. Token masks: per state, computed on first use by walking the
// vocabulary's byte trie through the automaton (a token is allowed when all
// its bytes lead to live states: from them the pattern can still be completed),
// then cached in the guide; guides are cached across requests by
// (kind, spec, whitespace pattern, vocabulary) in a bounded LRU
// (compile_guide). The same idea as outlines' index (Willard & Louf 2023,
// "Efficient Guided Generation for Large Language Models"), computed lazily.
//
// End of output: EOS is allowed when the state accepts (the engine adds it:
// the mask holds text tokens only). When a state allows no text token (the
// pattern can only end, or the vocabulary cannot continue it) the sequence
// finishes with "stop" (engine/sched/stop_checker.cpp). Thread-safe: masks
// are filled under a mutex (the engine thread reads, servers compile).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/guided/automaton.h"
#include "engine/guided/json_schema_regex.h"
#include "engine/guided/regex_dfa.h"
#include "engine/guided/token_vocab.h"

namespace pagoda::guided {

enum class GuideKind { kRegex, kChoice, kJson, kJsonObject, kGrammar, kStructuralTag };

// What a request asks for (SamplingParams::guided).
struct GuideSpec {
  GuideKind kind = GuideKind::kRegex;
  std::string spec;  // regex, JSON array of choices, schema, grammar or structural tag text
  // JSON kinds: the regex between tokens ("" = none).
  std::string whitespace_pattern{kDefaultWhitespace};
  bool disable_additional_properties = false;  // JSON: absent additionalProperties = false
  bool operator==(const GuideSpec&) const = default;
};

// Allowed text tokens of one state: bit (id % 64) of words[id / 64].
struct TokenMask {
  std::vector<uint64_t> words;  // [ceil(vocab / 64)]
  int64_t count = 0;            // set bits
  bool test(int32_t id) const {
    const auto i = static_cast<size_t>(id) >> 6;
    return id >= 0 && i < words.size() && ((words[i] >> (id & 63)) & 1u);
  }
};

class Guide {
 public:
  Guide(ByteDfa dfa, std::shared_ptr<const TokenVocab> vocab, std::string regex);
  // `text`: the regex or grammar it was compiled from (regex()).
  Guide(std::unique_ptr<const Automaton> automaton, std::shared_ptr<const TokenVocab> vocab,
        std::string text);

  int32_t start() const { return automaton_->start(); }
  // State after token `id`'s bytes from `state`; kDeadState (-1) when the
  // token is not allowed there (or has no bytes).
  int32_t advance(int32_t state, int32_t id) const;
  // State after raw bytes (tests, prefixes); kDeadState when they leave the pattern.
  int32_t walk(int32_t state, std::string_view bytes) const {
    return state < 0 ? kDeadState : automaton_->walk(state, bytes);
  }
  bool accepting(int32_t state) const { return state >= 0 && automaton_->accepting(state); }
  // The text tokens allowed from `state` (computed once, then cached).
  // Throws std::out_of_range for a state that does not exist.
  const TokenMask& mask(int32_t state) const;
  // mask(state) from a background worker (mask_precompute.h): the same
  // cache, counted apart (MaskFillTotals::background_*).
  void precompute(int32_t state) const;
  // True when some text token is allowed from `state` (mask(state).count >
  // 0) — decided from the automaton alone when every byte that leads to a
  // live state is itself a token (byte-level vocabularies: a longer allowed
  // token's first byte is one), else from the mask. The finish check after
  // each token (stop_checker.h) asks this, so a new state's mask need not be
  // filled on the engine thread there.
  bool can_continue(int32_t state) const;
  // True when mask(state) is cached (false for states that do not exist).
  bool has_mask(int32_t state) const;
  // True when `text` is a complete match (tests).
  bool matches(std::string_view text) const { return accepting(walk(start(), text)); }
  const std::string& regex() const { return regex_; }  // the compiled pattern or grammar
  // Most bytes a complete output can have; -1 when unbounded (or a grammar).
  int64_t max_output_bytes() const { return automaton_->max_output_bytes(); }
  const TokenVocab& vocab() const { return *vocab_; }
  size_t num_states() const { return automaton_->num_states(); }
  const Automaton& automaton() const { return *automaton_; }

 private:
  const TokenMask& fill(int32_t state, bool background) const;
  std::unique_ptr<const Automaton> automaton_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::string regex_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<TokenMask>> masks_;  // by state, filled lazily
};

// Token masks computed in this process and the time spent on them,
// seconds: by Guide::mask's first use of a state (on the caller's thread),
// by Guide::precompute (the workers of mask_precompute.h, and the thread
// that waits in fill_masks), and the wall time callers waited in
// fill_masks. The engine thread's cost between steps is seconds +
// wait_seconds (LLM::generate logs it per run).
struct MaskFillTotals {
  int64_t masks = 0;
  double seconds = 0.0;
  int64_t background_masks = 0;
  double background_seconds = 0.0;
  double wait_seconds = 0.0;
};
MaskFillTotals mask_fill_totals();
void add_mask_wait(double seconds);  // fill_masks' own accounting

// The pattern a regular spec compiles to. Throws std::invalid_argument (a
// RegexError or a schema error) naming the problem; kGrammar and
// kStructuralTag have no regex (std::invalid_argument).
std::string guide_regex(const GuideSpec& spec);

// Compiles (or finds in the cache: the most recent kGuideCacheSize specs
// per process) the guide of `spec` over `vocab`. Throws
// std::invalid_argument naming the problem (bad regex, schema, choices,
// grammar: a GrammarError; structural tag: a StructuralTagError).
inline constexpr size_t kGuideCacheSize = 64;
std::shared_ptr<const Guide> compile_guide(const GuideSpec& spec,
                                           const std::shared_ptr<const TokenVocab>& vocab);

}  // namespace pagoda::guided
