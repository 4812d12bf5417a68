// Reading a byte-level BPE tokenizer's files into a BpeSpec: HF
// tokenizer.json (tokenizers' serialization format), or the older
// vocab.json + merges.txt pair (GPT-2 / transformers' slow tokenizers).
#pragma once
#include <optional>
#include <string>

#include "engine/tokenizer/bpe_tokenizer.h"

namespace pagoda {

// tokenizer.json -> spec, or nullopt when the file is not byte-level BPE
// (model.type is not "BPE", or neither decoder nor pre_tokenizer is
// ByteLevel: e.g. Llama 2's Metaspace BPE). Supported components: normalizer
// null / NFC / Sequence of NFC; pre_tokenizer Split (Regex or String pattern,
// behavior Isolated, invert false) and ByteLevel (add_prefix_space false;
// use_regex true gives GPT-2's pattern), alone or in a Sequence with one
// regex at most; model BPE without dropout, byte_fallback, subword prefix or
// suffix; merges as "a b" strings or [a, b] pairs. Anything else:
// std::runtime_error naming the file and the component.
std::optional<BpeSpec> read_bpe_tokenizer_json(const std::string& file);

// vocab.json (token -> id) + merges.txt (one "a b" per line in rank order,
// an optional leading "#version" line, blank lines ignored) as transformers'
// Qwen2Tokenizer reads them: Qwen2's Split pattern (bpe::kQwen2Pattern), NFC
// normalization (Qwen2Tokenizer normalizes its input to NFC), added tokens
// from tokenizer_config.json's "added_tokens_decoder" (config_file may not
// exist). Throws std::runtime_error naming the malformed file.
BpeSpec read_bpe_vocab_merges(const std::string& vocab_file, const std::string& merges_file,
                              const std::string& config_file);

}  // namespace pagoda
