#include "engine/guided/guide.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <list>
#include <new>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/guided/ebnf_grammar.h"
#include "engine/guided/grammar_automaton.h"
#include "engine/guided/json_schema_regex.h"
#include "engine/guided/mask_precompute.h"
#include "engine/guided/structural_tag.h"

namespace pagoda::guided {

Guide::Guide(ByteDfa dfa, std::shared_ptr<const TokenVocab> vocab, std::string regex)
    : Guide(std::make_unique<DfaAutomaton>(std::move(dfa)), std::move(vocab), std::move(regex)) {}

Guide::Guide(std::unique_ptr<const Automaton> automaton, std::shared_ptr<const TokenVocab> vocab,
             std::string text)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)), regex_(std::move(text)) {
  if (!automaton_ || !vocab_) throw std::invalid_argument("Guide: no automaton or vocabulary");
}

int32_t Guide::advance(int32_t state, int32_t id) const {
  const std::string& b = vocab_->bytes(id);
  if (state < 0 || b.empty()) return kDeadState;
  return automaton_->walk(state, b);
}

namespace {
std::atomic<int64_t> g_masks_filled{0};
std::atomic<int64_t> g_mask_fill_ns{0};
std::atomic<int64_t> g_bg_masks_filled{0};
std::atomic<int64_t> g_bg_mask_fill_ns{0};
std::atomic<int64_t> g_mask_wait_ns{0};
}  // namespace

void add_mask_wait(double seconds) {
  g_mask_wait_ns.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

bool Guide::can_continue(int32_t state) const {
  if (state < 0) return false;
  if (has_mask(state)) return mask(state).count > 0;
  bool unsure = false;
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (automaton_->walk(state, std::string_view(&c, 1)) < 0) continue;
    if (vocab_->has_single_byte_token(static_cast<uint8_t>(b))) return true;
    unsure = true;  // a longer token starting with b may or may not fit
  }
  return unsure && mask(state).count > 0;
}

bool Guide::has_mask(int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto i = static_cast<size_t>(state);
  return state >= 0 && i < masks_.size() && masks_[i] != nullptr;
}

MaskFillTotals mask_fill_totals() {
  return {g_masks_filled.load(std::memory_order_relaxed),
          static_cast<double>(g_mask_fill_ns.load(std::memory_order_relaxed)) * 1e-9,
          g_bg_masks_filled.load(std::memory_order_relaxed),
          static_cast<double>(g_bg_mask_fill_ns.load(std::memory_order_relaxed)) * 1e-9,
          static_cast<double>(g_mask_wait_ns.load(std::memory_order_relaxed)) * 1e-9};
}

const TokenMask& Guide::mask(int32_t state) const { return fill(state, false); }

void Guide::precompute(int32_t state) const { fill(state, true); }

const TokenMask& Guide::fill(int32_t state, bool background) const {
  const auto i = static_cast<size_t>(state);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state < 0 || i >= automaton_->num_states())
      throw std::out_of_range(fmt::format("Guide::mask: no state {}", state));
    if (i < masks_.size() && masks_[i]) return *masks_[i];
  }
  // Filled outside the lock (Automaton's const calls are thread-safe): the
  // engine thread never waits for a worker filling another state
  // (mask_precompute.h); two fills of one state keep the first.
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<TokenMask>();
  m->words.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  m->count = automaton_->allowed_tokens(state, *vocab_, m->words);
  std::lock_guard<std::mutex> lock(mu_);
  if (i >= masks_.size()) masks_.resize(i + 1);
  auto& slot = masks_[i];
  if (slot) return *slot;
  slot = std::move(m);
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  (background ? g_bg_masks_filled : g_masks_filled).fetch_add(1, std::memory_order_relaxed);
  (background ? g_bg_mask_fill_ns : g_mask_fill_ns).fetch_add(ns, std::memory_order_relaxed);
  return *slot;
}

std::string guide_regex(const GuideSpec& spec) {
  switch (spec.kind) {
    case GuideKind::kRegex:
      return spec.spec;
    case GuideKind::kChoice: {
      nlohmann::json arr = nlohmann::json::parse(spec.spec, nullptr, false);
      if (!arr.is_array() || arr.empty())
        throw std::invalid_argument("guided_choice must be a non-empty list of strings");
      std::string re;
      for (const auto& c : arr) {
        if (!c.is_string()) throw std::invalid_argument("guided_choice must be a list of strings");
        if (!re.empty()) re += '|';
        re += "(?:" + regex_escape(c.get<std::string>()) + ")";
      }
      return re;
    }
    case GuideKind::kJson:
      return json_schema_to_regex(spec.spec, spec.whitespace_pattern,
                                  spec.disable_additional_properties);
    case GuideKind::kJsonObject:
      return json_object_regex(spec.whitespace_pattern);
    case GuideKind::kGrammar:
      throw std::invalid_argument("a grammar does not compile to a regex");
    case GuideKind::kStructuralTag:
      throw std::invalid_argument("a structural tag does not compile to one regex");
  }
  throw std::invalid_argument("unknown guide kind");
}

std::shared_ptr<const Guide> compile_guide(const GuideSpec& spec,
                                           const std::shared_ptr<const TokenVocab>& vocab) {
  if (!vocab) throw std::invalid_argument("compile_guide: no vocabulary");
  struct Entry {
    GuideSpec spec;
    std::shared_ptr<const TokenVocab> vocab;
    std::shared_ptr<const Guide> guide;
  };
  static std::mutex mu;
  static std::list<Entry> lru;  // most recent first
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = lru.begin(); it != lru.end(); ++it)
      if (it->vocab == vocab && it->spec == spec) {
        lru.splice(lru.begin(), lru, it);
        return lru.front().guide;
      }
  }
  std::shared_ptr<const Guide> guide;
  // Out of memory while compiling (the limits in regex_dfa.h keep one
  // compilation to tens of MB, but several at once under a tight limit can
  // still fail): the request's error (a 400 naming its field), not a 500.
  try {
    if (spec.kind == GuideKind::kGrammar) {
      guide = std::make_shared<const Guide>(
          std::make_unique<GrammarAutomaton>(parse_ebnf(spec.spec)), vocab, spec.spec);
    } else if (spec.kind == GuideKind::kStructuralTag) {
      guide = std::make_shared<const Guide>(
          structural_tag_dfa(parse_structural_tag(std::string_view(spec.spec)),
                             spec.whitespace_pattern, spec.disable_additional_properties),
          vocab, spec.spec);
    } else {
      std::string re = guide_regex(spec);
      guide = std::make_shared<const Guide>(ByteDfa::compile(re), vocab, std::move(re));
    }
  } catch (const std::bad_alloc&) {
    throw RegexTooComplex(
        "pattern too complex: the server ran out of memory compiling it (see the limits in "
        "docs/API.md)");
  }
  // A DFA's states are all known now: their masks are filled in the
  // background before the engine reaches them (a grammar's states appear
  // as it runs).
  if (spec.kind != GuideKind::kGrammar) precompute_masks(guide);
  std::lock_guard<std::mutex> lock(mu);
  lru.push_front(Entry{spec, vocab, guide});
  if (lru.size() > kGuideCacheSize) lru.pop_back();
  return guide;
}

}  // namespace pagoda::guided
