// The BPE model of HF tokenizers (models/bpe/{model,word}.rs), byte-level:
// a word's bytes start as one symbol each (the GPT-2 byte map's character) and
// the lowest-ranked adjacent pair is merged, leftmost first among equal
// ranks, until no pair has a merge (Sennrich et al. 2016, "Neural Machine
// Translation of Rare Words with Subword Units"; GPT-2's byte-level variant,
// Radford et al. 2019).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pagoda::bpe {

class BpeModel {
 public:
  // vocab: byte-level token string (e.g. "ĠHello") -> id. merges: pairs of
  // token strings in rank order (rank 0 first); each pair's parts and their
  // concatenation must be in vocab, else std::runtime_error naming the merge.
  // ignore_merges (HF BPE option, e.g. Llama 3): a word whose whole
  // byte-level string is a vocab token becomes that token without merging.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized word given as raw bytes (the byte
  // map is applied here). A byte whose mapped character is not in the vocab
  // is dropped (HF BPE without unk_token). Results of words up to 256 bytes
  // are cached (thread-safe; the cache is cleared when it holds 65536 words).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  std::vector<int32_t> merge_word(std::string_view word) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::array<int32_t, 256> byte_id_{};  // id of each byte's mapped char, -1 if absent
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  bool ignore_merges_;

  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace pagoda::bpe
