// Parsing of client JSON (HTTP request bodies, WebSocket messages) with the
// checks RFC 8259 leaves to the receiver made strict, so that a request
// means one thing:
//   - an object's names must be unique (RFC 8259 §4 "SHOULD be unique";
//     nlohmann::json would silently keep the last value);
//   - strings must be valid Unicode: a \uD800-\uDBFF escape must be followed
//     by a \uDC00-\uDFFF one and a low surrogate must not stand alone
//     (RFC 8259 §8.2; nlohmann::json's lexer rejects these), raw bytes must
//     be UTF-8 (RFC 8259 §8.1);
//   - nesting at most kMaxJsonDepth levels (keeps recursive walks of the
//     value off the end of a network thread's stack).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace pagoda {

inline constexpr int kMaxJsonDepth = 64;

// Why parse_strict_json refused a text: a message for the client, and the
// top-level field it concerns where one is known (a number beyond double
// range: the top-level key it lies under; "" otherwise) for the OpenAI
// error's `param`.
struct JsonParseFailure {
  std::string message;
  std::string param;
  // The text is not JSON at all (a syntax error), as opposed to JSON this
  // reading refuses (a number beyond double range, a key twice, too deep).
  bool not_json = false;
};

// Parses `text` (any JSON value). On failure returns a message for the
// client that starts with `what` ("Request body", "Message") and names the
// problem: "... is not valid JSON: <the parser's reason, with line and
// column>", "... has the key 'k' twice in one JSON object", "... nests JSON
// deeper than 64 levels", "... has a number beyond the range of a double in
// 'k'" (param: the top-level field holding it). Never throws except
// std::bad_alloc.
std::variant<nlohmann::json, JsonParseFailure> parse_strict_json(std::string_view text,
                                                                 std::string_view what);

}  // namespace pagoda
