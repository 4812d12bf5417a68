// Jinja2 parser: tokens -> statement tree, with Jinja2's operator precedence
// (jinja2/parser.py: condexpr < or < and < not < compare < +,- < ~ < *,/,//,%
// < ** < unary, with filters `|` and tests `is` binding to the unary operand).
#pragma once
#include <vector>

#include "engine/chat/jinja_ast.h"
#include "engine/chat/jinja_lexer.h"

namespace pagoda::jinja {

// Parses a token stream from tokenize(). Throws ChatTemplateError
// "template syntax error: ... (line N)" on malformed input.
Body parse(const std::vector<Token>& tokens);

}  // namespace pagoda::jinja
