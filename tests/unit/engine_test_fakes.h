// Test doubles for the engine core's tests:
//  - FakeExecutor: a ModelExecutor whose "model" keeps a shadow paged KV cache
//    (token + prefix hash per slot), writes each step's tokens through
//    slot_mapping, reads every sampling sequence's context back through its
//    block table, and returns logits that are a hash of that whole context.
//    So any batching / paging bug changes the outputs, and the batch metadata
//    is checked against what a real paged KV cache needs (unique slots,
//    contiguous positions, right context_lens, slots inside the sequence's
//    own blocks, no stale slot read). Violations throw std::logic_error.
//  - reference_logits(): the same function computed straight from a token
//    list, with no paging: the independent reference.
//  - FakeTokenizer: ids map to fixed strings; ids 3 and 4 are the two halves
//    of "€" (E2 82 | AC), so UTF-8 characters split across tokens occur.
#pragma once
#include <cstdint>
#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/model_executor.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda::testing {

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Chained hash of tokens[0..p]: h_p = mix(h_{p-1} ^ token_p * K).
inline uint64_t chain(uint64_t h, int32_t token) {
  return mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x100000001B3ull));
}
// Logits for a context whose chained hash is h: values in [-3, 3).
inline void logits_from_hash(uint64_t h, int64_t vocab, float* out) {
  for (int64_t v = 0; v < vocab; ++v) {
    uint64_t r = mix64(h + static_cast<uint64_t>(v) * 0xD1B54A32D192ED03ull);
    out[v] = static_cast<float>(static_cast<double>(r >> 40) / static_cast<double>(1 << 24) * 6.0 - 3.0);
  }
}
inline std::vector<float> reference_logits(std::span<const int32_t> tokens, int64_t vocab) {
  uint64_t h = 0;
  for (int32_t t : tokens) h = chain(h, t);
  std::vector<float> out(static_cast<size_t>(vocab));
  logits_from_hash(h, vocab, out.data());
  return out;
}
// Greedy continuation of `prompt` under the reference model (argmax, ties
// to the lowest id), stopping after max_tokens or at a token in `stop_ids`
// (included).
inline std::vector<int32_t> reference_greedy(std::vector<int32_t> tokens, int64_t max_tokens,
                                             int64_t vocab, const std::vector<int32_t>& stop_ids = {}) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < max_tokens; ++i) {
    std::vector<float> l = reference_logits(tokens, vocab);
    int32_t best = 0;
    for (int32_t v = 1; v < vocab; ++v)
      if (l[static_cast<size_t>(v)] > l[static_cast<size_t>(best)]) best = v;
    tokens.push_back(best);
    out.push_back(best);
    bool stop = false;
    for (int32_t s : stop_ids) stop |= s == best;
    if (stop) break;
  }
  return out;
}

class FakeExecutor : public ModelExecutor {
 public:
  // num_host_blocks: the swap space's blocks; swap_out / swap_in copy the
  // slots' tokens and context hashes, so a block swapped back to the wrong
  // place (or not at all) is caught when it is read.
  FakeExecutor(int64_t vocab, int64_t num_blocks, int64_t block_size, int64_t num_host_blocks = 0)
      : vocab_(vocab),
        num_blocks_(num_blocks),
        block_size_(block_size),
        num_host_blocks_(num_host_blocks),
        slot_token_(static_cast<size_t>(num_blocks * block_size), -1),
        slot_hash_(static_cast<size_t>(num_blocks * block_size), 0),
        host_token_(static_cast<size_t>(num_host_blocks * block_size), -1),
        host_hash_(static_cast<size_t>(num_host_blocks * block_size), 0) {}

  int64_t vocab_size() const override { return vocab_; }
  int64_t num_kv_blocks() const override { return num_blocks_; }
  int64_t block_size() const override { return block_size_; }
  int64_t num_host_kv_blocks() const override { return num_host_blocks_; }
  void swap_out(std::span<const BlockSwap> pairs) override {
    for (const BlockSwap& p : pairs) {
      check_pair(p);
      copy_block(slot_token_, slot_hash_, p.device, host_token_, host_hash_, p.host);
      ++blocks_swapped_out_;
    }
  }
  void swap_in(std::span<const BlockSwap> pairs) override {
    for (const BlockSwap& p : pairs) {
      check_pair(p);
      copy_block(host_token_, host_hash_, p.host, slot_token_, slot_hash_, p.device);
      ++blocks_swapped_in_;
    }
  }
  void copy_blocks(std::span<const BlockCopy> copies) override {
    for (const BlockCopy& c : copies) {
      check(
          c.src >= 0 && c.src < num_blocks_ && c.dst >= 0 && c.dst < num_blocks_ && c.src != c.dst,
          "block copy out of range");
      copy_block(slot_token_, slot_hash_, c.src, slot_token_, slot_hash_, c.dst);
      ++blocks_copied_;
    }
  }
  int64_t blocks_copied() const { return blocks_copied_; }
  int64_t blocks_swapped_out() const { return blocks_swapped_out_; }
  int64_t blocks_swapped_in() const { return blocks_swapped_in_; }
  std::string describe() const override { return "fake"; }

  void execute(const ForwardBatch& b, std::vector<float>& logits) override {
    const int32_t T = b.num_tokens(), B = b.num_seqs();
    check(b.positions.size() == static_cast<size_t>(T) && b.slot_mapping.size() == static_cast<size_t>(T),
          "positions/slot_mapping size != T");
    check(B > 0 && b.query_start_loc[0] == 0 && b.query_start_loc[static_cast<size_t>(B)] == T,
          "query_start_loc ends");
    check(b.context_lens.size() == static_cast<size_t>(B), "context_lens size");
    check(b.block_tables.size() == static_cast<size_t>(B) * static_cast<size_t>(b.max_blocks_per_seq),
          "block_tables size");
    std::set<int32_t> slots(b.slot_mapping.begin(), b.slot_mapping.end());
    check(slots.size() == static_cast<size_t>(T), "slots not unique within the batch");
    // Blocks may be shared between sequences (prefix-cache hits), also a
    // block this very step writes (a hit on a block recorded when the step
    // was scheduled): then only one table of the batch writes into it, and
    // every other table listing it comes later in the batch (a real forward
    // writes every token's K/V before attention reads; here tables are
    // written and read in batch order). Whether what a table reads is what
    // its own tokens need is checked by the prefix hashes on every read.
    std::map<int32_t, int32_t> writer_of;  // block -> the table writing into it
    for (int32_t i = 0; i < B; ++i)
      for (int32_t t = b.query_start_loc[static_cast<size_t>(i)];
           t < b.query_start_loc[static_cast<size_t>(i) + 1]; ++t) {
        auto [it, fresh] = writer_of.emplace(
            b.slot_mapping[static_cast<size_t>(t)] / static_cast<int32_t>(block_size_), i);
        check(fresh || it->second == i, "two sequences write into one block");
      }
    for (int32_t i = 0; i < B; ++i) {
      const int32_t ctx = b.context_lens[static_cast<size_t>(i)];
      const int32_t* table = b.block_tables.data() + static_cast<size_t>(i) * static_cast<size_t>(b.max_blocks_per_seq);
      const int64_t nblocks = std::min<int64_t>((ctx + block_size_ - 1) / block_size_, b.max_blocks_per_seq);
      std::set<int32_t> mine(table, table + nblocks);
      check(mine.size() == static_cast<size_t>(nblocks), "a block appears twice in one table");
      for (int32_t blk : mine) {
        auto w = writer_of.find(blk);
        check(w == writer_of.end() || w->second <= i,
              "a table lists a block another writes later in the batch");
      }
    }
    for (int32_t i = 0; i < B; ++i) {
      const int32_t q0 = b.query_start_loc[static_cast<size_t>(i)], q1 = b.query_start_loc[static_cast<size_t>(i) + 1];
      const int32_t ctx = b.context_lens[static_cast<size_t>(i)];
      check(q1 > q0 && ctx >= q1 - q0, "empty query or context shorter than query");
      const int32_t* table = b.block_tables.data() + static_cast<size_t>(i) * static_cast<size_t>(b.max_blocks_per_seq);
      const int64_t nblocks = (ctx + block_size_ - 1) / block_size_;
      check(nblocks <= b.max_blocks_per_seq, "context needs more blocks than the table row has");
      for (int64_t k = 0; k < nblocks; ++k) check(table[k] >= 0 && table[k] < num_blocks_, "block id out of range");
      for (int32_t t = q0; t < q1; ++t) {
        const int32_t p = ctx - (q1 - q0) + (t - q0);
        check(b.positions[static_cast<size_t>(t)] == p, "positions not contiguous up to context_len - 1");
        check(b.slot_mapping[static_cast<size_t>(t)] == slot_of(table, p), "slot_mapping disagrees with block table");
        check(b.input_ids[static_cast<size_t>(t)] >= 0 && b.input_ids[static_cast<size_t>(t)] < vocab_, "input id out of vocab");
      }
      // Write this step's tokens (the "KV"), with each slot's prefix hash.
      uint64_t h = ctx - (q1 - q0) > 0 ? read_prefix_hash(table, ctx - (q1 - q0)) : 0;
      for (int32_t t = q0; t < q1; ++t) {
        h = chain(h, b.input_ids[static_cast<size_t>(t)]);
        size_t s = static_cast<size_t>(b.slot_mapping[static_cast<size_t>(t)]);
        slot_token_[s] = b.input_ids[static_cast<size_t>(t)];
        slot_hash_[s] = h;
      }
      if (q1 - q0 > 1 || ctx > 1) ++prefill_like_;
    }
    // Logits rows: last token of sampling sequences only, in order.
    logits.assign(b.logits_indices.size() * static_cast<size_t>(vocab_), 0.0f);
    size_t row = 0;
    for (int32_t i = 0, li = 0; i < B; ++i) {
      const int32_t last = b.query_start_loc[static_cast<size_t>(i) + 1] - 1;
      if (li < static_cast<int32_t>(b.logits_indices.size()) && b.logits_indices[static_cast<size_t>(li)] == last) {
        const int32_t* table = b.block_tables.data() + static_cast<size_t>(i) * static_cast<size_t>(b.max_blocks_per_seq);
        uint64_t h = read_prefix_hash(table, b.context_lens[static_cast<size_t>(i)]);
        logits_from_hash(h, vocab_, logits.data() + row * static_cast<size_t>(vocab_));
        ++row;
        ++li;
      } else {
        ++rows_without_logits_;  // a non-final prefill chunk
      }
    }
    check(row == b.logits_indices.size(), "logits_indices not the last tokens of sequences, in order");
    ++calls_;
    max_batch_seqs_ = std::max<int64_t>(max_batch_seqs_, B);
    max_batch_tokens_ = std::max<int64_t>(max_batch_tokens_, T);
  }

  int64_t calls() const { return calls_; }
  int64_t max_batch_seqs() const { return max_batch_seqs_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }
  int64_t rows_without_logits() const { return rows_without_logits_; }

 private:
  static void check(bool ok, const char* what) {
    if (!ok) throw std::logic_error(std::string("FakeExecutor: ") + what);
  }
  int32_t slot_of(const int32_t* table, int64_t p) const {
    return static_cast<int32_t>(table[p / block_size_] * block_size_ + p % block_size_);
  }
  // Reads positions [0, n) back through the block table, checking each
  // slot holds the token written for this very context.
  uint64_t read_prefix_hash(const int32_t* table, int64_t n) const {
    uint64_t h = 0;
    for (int64_t p = 0; p < n; ++p) {
      size_t s = static_cast<size_t>(slot_of(table, p));
      check(slot_token_[s] >= 0, "reading a KV slot never written");
      h = chain(h, slot_token_[s]);
      check(slot_hash_[s] == h, "reading a stale KV slot (written for another context)");
    }
    return h;
  }

  void check_pair(const BlockSwap& p) const {
    check(p.device >= 0 && p.device < num_blocks_ && p.host >= 0 && p.host < num_host_blocks_,
          "swap pair out of range");
  }
  void copy_block(const std::vector<int32_t>& from_tok, const std::vector<uint64_t>& from_hash,
                  int32_t from, std::vector<int32_t>& to_tok, std::vector<uint64_t>& to_hash,
                  int32_t to) const {
    const auto bs = static_cast<size_t>(block_size_);
    for (size_t k = 0; k < bs; ++k) {
      to_tok[static_cast<size_t>(to) * bs + k] = from_tok[static_cast<size_t>(from) * bs + k];
      to_hash[static_cast<size_t>(to) * bs + k] = from_hash[static_cast<size_t>(from) * bs + k];
    }
  }

  int64_t vocab_, num_blocks_, block_size_, num_host_blocks_;
  std::vector<int32_t> slot_token_;
  std::vector<uint64_t> slot_hash_;
  std::vector<int32_t> host_token_;
  std::vector<uint64_t> host_hash_;
  int64_t blocks_swapped_out_ = 0, blocks_swapped_in_ = 0, blocks_copied_ = 0;
  int64_t calls_ = 0, max_batch_seqs_ = 0, max_batch_tokens_ = 0, rows_without_logits_ = 0,
          prefill_like_ = 0;
};

class FakeTokenizer : public Tokenizer {
 public:
  explicit FakeTokenizer(int64_t vocab) : vocab_(vocab) {}
  static std::string piece(int32_t id) {
    switch (id) {
      case 0: return "<unk>";
      case 1: return "<s>";
      case 2: return "</s>";
      case 3: return "\xE2\x82";  // first two bytes of "€"
      case 4: return "\xAC";      // its last byte
      default: {
        std::string s;
        s += static_cast<char>('a' + (id * 7) % 26);
        s += static_cast<char>('a' + (id * 11 + 3) % 26);
        return s;
      }
    }
  }
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override {
    std::string raw;
    for (int32_t id : ids)
      if (!(skip_special_tokens && is_special(id))) raw += piece(id);
    return sanitize_utf8(raw);
  }
  std::string id_to_piece(int32_t id) const override { return piece(id); }
  bool is_special(int32_t id) const override { return id <= 2; }
  int64_t vocab_size() const override { return vocab_; }
  std::optional<int32_t> bos_token_id() const override { return 1; }
  std::optional<int32_t> eos_token_id() const override { return 2; }

  // Invalid or incomplete UTF-8 sequences become U+FFFD (as sentencepiece's
  // decode / Python's errors="replace").
  static std::string sanitize_utf8(const std::string& s) {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      bool ok = len > 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(s, i, len);
        i += len;
      } else {
        out += "\xEF\xBF\xBD";
        ++i;
        while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && len > 1) ++i;
      }
    }
    return out;
  }

 private:
  int64_t vocab_;
};

}  // namespace pagoda::testing
