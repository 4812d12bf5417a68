#include "engine/guided/guide.h"

#include <fmt/format.h>

#include <list>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/guided/json_schema_regex.h"

namespace pagoda::guided {

Guide::Guide(ByteDfa dfa, std::shared_ptr<const TokenVocab> vocab, std::string regex)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)), regex_(std::move(regex)) {
  masks_.resize(dfa_.num_states());
}

int32_t Guide::advance(int32_t state, int32_t id) const {
  const std::string& b = vocab_->bytes(id);
  if (state < 0 || b.empty()) return ByteDfa::kDead;
  return dfa_.walk(state, b);
}

const TokenMask& Guide::mask(int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = masks_.at(static_cast<size_t>(state));
  if (slot) return *slot;
  auto m = std::make_unique<TokenMask>();
  m->words.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  const auto& nodes = vocab_->nodes();
  // Depth-first walk of the trie, pruned where the DFA dies.
  std::vector<std::pair<int32_t, int32_t>> stack{{0, state}};  // (trie node, DFA state)
  while (!stack.empty()) {
    auto [node, s] = stack.back();
    stack.pop_back();
    for (int32_t c = nodes[static_cast<size_t>(node)].first_child; c >= 0;
         c = nodes[static_cast<size_t>(c)].next_sibling) {
      const auto& child = nodes[static_cast<size_t>(c)];
      const int32_t t = dfa_.next(s, child.byte);
      if (t < 0) continue;
      for (int32_t id = child.first_token; id >= 0; id = vocab_->token_next(id)) {
        m->words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        ++m->count;
      }
      if (child.first_child >= 0) stack.emplace_back(c, t);
    }
  }
  slot = std::move(m);
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
  std::string re = guide_regex(spec);
  auto guide = std::make_shared<const Guide>(ByteDfa::compile(re), vocab, std::move(re));
  std::lock_guard<std::mutex> lock(mu);
  lru.push_front(Entry{spec, vocab, guide});
  if (lru.size() > kGuideCacheSize) lru.pop_back();
  return guide;
}

}  // namespace pagoda::guided
