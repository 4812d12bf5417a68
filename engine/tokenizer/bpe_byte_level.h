// Byte-level helpers of HF byte-level BPE (GPT-2's encoder.py, HF tokenizers'
// pre_tokenizers/byte_level.rs): the bytes_to_unicode map, UTF-8 checks and
// lossy UTF-8 decoding.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pagoda::bpe {

// GPT-2 bytes_to_unicode: byte b -> the UTF-8 text of one code point. Printable
// Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to themselves,
// the other 68 bytes, in order, to U+0100, U+0101, ... (space 0x20 -> "Ġ"
// U+0120, '\n' -> "Ċ" U+010A).
const std::array<std::string, 256>& byte_to_unicode();

// Inverse map: the byte a code point stands for, or nullopt for a code point
// outside the map's 256 values.
std::optional<uint8_t> unicode_to_byte(uint32_t code_point);

// Bytes of a byte-level token string (e.g. "ĠHello" -> " Hello") as HF's
// ByteLevel decoder does: if every code point of `token` is in the map, the
// mapped bytes; otherwise the token's own bytes unchanged (added tokens such
// as "<|im_start|>" or text with other characters).
std::string token_to_bytes(std::string_view token);

// RFC 3629 well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool is_valid_utf8(std::string_view s);
// The byte offset where `s` stops being well-formed UTF-8 (the first byte
// of the first maximal invalid subpart); nullopt when it is valid.
std::optional<size_t> first_invalid_utf8(std::string_view s);

// Decodes bytes as UTF-8, each maximal invalid subpart replaced by U+FFFD
// (Unicode 15 §3.9 "substitution of maximal subparts"; Rust's
// String::from_utf8_lossy as used by HF's ByteLevel decoder, and Python's
// bytes.decode(errors="replace") give the same).
std::string utf8_lossy(std::string_view bytes);

// Code points of valid UTF-8 text. Precondition: is_valid_utf8(s).
// Next code point at s[pos]; advances pos.
uint32_t next_code_point(std::string_view s, size_t& pos);

}  // namespace pagoda::bpe
