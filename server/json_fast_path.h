// A fast path for parse_strict_json (strict_json.h): a recursive-descent
// JSON parser that builds the nlohmann::json value directly, moving each
// string into place (nlohmann's lexer copies every byte twice, into its
// token buffer and its error-message buffer, both grown by reallocation,
// and its DOM builder copies the string once more: a 30 MB prompt cost
// about 4x its size in memory and a second of CPU; here it is one scan and
// one copy, runs of plain ASCII checked 8 bytes at a time).
//
// It accepts a subset of what the strict parser accepts and gives the same
// value for it: RFC 8259 text without a byte order mark, whose strings are
// valid UTF-8 (Unicode Table 3-7, the table nlohmann's lexer implements)
// with well-paired \u surrogate escapes, whose objects have unique names,
// nested at most max_depth containers deep, and whose numbers are finite
// doubles (non-negative integers that fit in uint64 as number_unsigned,
// negative ones that fit in int64 as number_integer, the rest as
// number_float, rounded as strtod does: nlohmann's own rules). Anything
// else (every error, and what it does not try to handle such as a BOM or
// an underflowing number) returns std::nullopt: the caller then runs the
// exact parser, which accepts it or words the error. Never throws except
// std::bad_alloc.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace pagoda {

std::optional<nlohmann::json> parse_json_fast_path(std::string_view text, int max_depth);

}  // namespace pagoda
