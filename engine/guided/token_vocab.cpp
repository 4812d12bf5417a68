#include "engine/guided/token_vocab.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include "engine/tokenizer/bpe_byte_level.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

namespace pagoda::guided {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string token_byte_string(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.vocab_size() || tok.is_special(id)) return {};
  const std::string piece = tok.id_to_piece(id);
  if (dynamic_cast<const SentencePieceTokenizer*>(&tok)) {
    if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>') {
      int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
      if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
    }
    std::string out;
    static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += piece[i++];
      }
    }
    return out;
  }
  if (dynamic_cast<const BpeTokenizer*>(&tok)) return bpe::token_to_bytes(piece);
  return tok.decode(std::span<const int32_t>(&id, 1), /*skip_special_tokens=*/false);
}

TokenVocab::TokenVocab(const Tokenizer& tok) {
  const auto n = static_cast<size_t>(tok.vocab_size());
  bytes_.resize(n);
  token_next_.assign(n, -1);
  nodes_.emplace_back();  // root
  for (size_t id = 0; id < n; ++id) {
    bytes_[id] = token_byte_string(tok, static_cast<int32_t>(id));
    if (bytes_[id].empty()) continue;
    if (bytes_[id].size() == 1) single_byte_[static_cast<uint8_t>(bytes_[id][0])] = true;
    int32_t node = 0;
    for (char ch : bytes_[id]) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t c = nodes_[static_cast<size_t>(node)].first_child;
      while (c >= 0 && nodes_[static_cast<size_t>(c)].byte != b)
        c = nodes_[static_cast<size_t>(c)].next_sibling;
      if (c < 0) {
        Node fresh;
        fresh.byte = b;
        fresh.next_sibling = nodes_[static_cast<size_t>(node)].first_child;
        c = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(fresh);
        nodes_[static_cast<size_t>(node)].first_child = c;
      }
      node = c;
    }
    token_next_[id] = nodes_[static_cast<size_t>(node)].first_token;
    nodes_[static_cast<size_t>(node)].first_token = static_cast<int32_t>(id);
  }
}

const std::string& TokenVocab::bytes(int32_t id) const {
  static const std::string kNone;
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return kNone;
  return bytes_[static_cast<size_t>(id)];
}

std::shared_ptr<const TokenVocab> TokenVocab::of(const std::shared_ptr<const Tokenizer>& tok) {
  if (!tok) throw std::invalid_argument("TokenVocab::of: no tokenizer");
  struct Entry {
    std::weak_ptr<const Tokenizer> tokenizer;  // the address alone could be reused
    std::weak_ptr<const TokenVocab> vocab;
  };
  static std::mutex mu;
  static std::map<const Tokenizer*, Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(cache, [](const auto& kv) {
    return kv.second.tokenizer.expired() || kv.second.vocab.expired();
  });
  if (auto it = cache.find(tok.get()); it != cache.end())
    if (auto v = it->second.vocab.lock()) return v;
  auto v = std::make_shared<const TokenVocab>(*tok);
  cache[tok.get()] = Entry{tok, v};
  return v;
}

}  // namespace pagoda::guided
