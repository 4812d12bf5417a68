#include "engine/guided/automaton.h"

#include <utility>

namespace pagoda::guided {

int64_t DfaAutomaton::allowed_tokens(int32_t state, const TokenVocab& vocab,
                                     std::vector<uint64_t>& words) const {
  int64_t count = 0;
  const auto& nodes = vocab.nodes();
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
      for (int32_t id = child.first_token; id >= 0; id = vocab.token_next(id)) {
        words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        ++count;
      }
      if (child.first_child >= 0) stack.emplace_back(c, t);
    }
  }
  return count;
}

}  // namespace pagoda::guided
