// UTF-8 byte-range sequences of a code-point range, for the byte-level
// automata (regex_dfa.h, grammar_automaton.h): the splitting of RE2's and
// Rust regex-syntax's Utf8Sequences.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda::guided {

// One sequence: a byte range [first, second] per byte of the encoding.
using Utf8ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// Appends to `out` sequences whose matches are exactly the UTF-8 encodings
// of the code points [lo, hi] (hi <= 0x10FFFF; surrogates are encoded as
// any other code point, so callers leave them out of their ranges). None
// when lo > hi.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8ByteSeq>& out);

}  // namespace pagoda::guided
