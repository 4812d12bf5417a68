// Jinja2 lexer: splits template source into text and tag tokens, applying
// the whitespace control of the environment transformers uses
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False) and
// the per-tag `-` / `+` modifiers. Semantics: Jinja2 template designer
// documentation, "Whitespace Control", "Comments", "Escaping" (raw blocks),
// "Literals"; line endings are normalised to "\n" (newline_sequence).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::jinja {

enum class TokType { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  TokType type;
  std::string value;  // text, name, operator, or unescaped string literal
  int line = 1;       // 1-based line of the token's start
  int64_t ival = 0;
  double fval = 0;
};

// Tokenizes `source`. Throws ChatTemplateError ("... (line N)") on an
// unterminated tag, comment or string, or an unexpected character.
std::vector<Token> tokenize(const std::string& source);

}  // namespace pagoda::jinja
