// JSON schema -> regular expression (regex_dfa.h syntax) matching JSON text
// that validates against the schema, in the manner of outlines'
// build_regex_from_schema (outlines/fsm/json_schema.py): each construct
// becomes a regex and the output is the concatenation. The regex matches a
// subset of the valid documents (never an invalid one):
//  - objects: the properties in the schema's order, required ones always,
//    optional ones maybe; no other keys (required names without a
//    "properties" entry are emitted with any value). An object without
//    "properties" and additionalProperties true/absent/a schema: any
//    string keys with values of that schema (false: "{}").
//  - arrays: "items" with minItems/maxItems, or "prefixItems" exactly.
//  - strings: minLength/maxLength (code points, escapes counted as one),
//    "pattern" (anchored ^...$ = the whole string; else a match anywhere),
//    "format" date, time, date-time, uuid; characters escaped as JSON needs.
//  - integers: minimum/maximum/exclusiveMinimum/exclusiveMaximum exactly
//    (decimal range regexes); numbers with bounds: an integer part inside
//    the bounds (a fraction only where it cannot cross them), no exponent.
//  - enum / const (each value's compact JSON text), type lists, anyOf,
//    oneOf (as alternation: branches should be disjoint), allOf of one
//    schema, $ref to "#", "#/$defs/..." or "#/definitions/..." within the
//    document; a recursive $ref is expanded kMaxRefDepth levels deep, past
//    which the branch that needs it is dropped.
//  - an empty schema / true: any JSON value nested at most kAnyJsonDepth.
// Whitespace between tokens ("{", ":", ",", "}", "[", "]") is
// `whitespace_pattern` as given: "" allows none (outlines' meaning);
// requests that name no pattern get kDefaultWhitespace (bounded, so a
// model cannot loop on spaces). Annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// ignored; any other keyword is an error naming it (nothing ignored
// silently).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace pagoda::guided {

class SchemaError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline constexpr int kMaxRefDepth = 3;
inline constexpr int kAnyJsonDepth = 2;
inline constexpr std::string_view kDefaultWhitespace = "[ ]?";

// schema_text: a JSON schema document. Throws SchemaError (bad JSON,
// unsupported keyword, unsatisfiable schema) naming the problem.
std::string json_schema_to_regex(std::string_view schema_text, std::string_view whitespace_pattern,
                                 bool disable_additional_properties = false);

// Any JSON object (response_format json_object), nesting at most
// kAnyJsonDepth levels below it.
std::string json_object_regex(std::string_view whitespace_pattern);

// Regex of the decimal integers in [lo, hi] (no leading zeros, "-0" never).
std::string integer_range_regex(long long lo, long long hi);

}  // namespace pagoda::guided
