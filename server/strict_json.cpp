#include "server/strict_json.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <vector>

#include "server/json_fast_path.h"

namespace pagoda {

using nlohmann::json;

namespace {

// nlohmann's what() without its "[json.exception.parse_error.101] " tag.
std::string without_tag(std::string s) {
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

std::string shortened(const std::string& key) {
  return key.size() > 100 ? key.substr(0, 100) + "..." : key;
}

// A SAX handler: nlohmann's own DOM builder (json_sax_dom_parser, linear in
// the input) plus the strict checks. Not nlohmann's callback parser: after
// each object it scans the enclosing container for a discarded element, so
// an array of n objects cost O(n^2) (100,000 chat messages: 5 s, 230 s under
// ASan).
class StrictSax {
 public:
  StrictSax(json& result, std::string_view what)
      : dom_(result, /*allow_exceptions=*/false), what_(what) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (!enter()) return false;
    open_objects_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    last_key_ = k;
    if (open_objects_.size() == 1 && depth_ == 1) top_key_ = k;
    if (!open_objects_.empty() && !open_objects_.back().insert(k).second)
      return fail(
          fmt::format("{} has the key '{}' twice in one JSON object (each key may appear once)",
                      what_, shortened(k)));
    return dom_.key(k);
  }
  bool end_object() {
    open_objects_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    // nlohmann refuses a number beyond double range (1e999) with
    // out_of_range 406: the client's input, so a 400 naming its field.
    if (ex.id == 406) {
      const std::string key = shortened(last_key_);
      std::string param = top_key_.size() > 100 ? "" : top_key_;
      return fail(key.empty() ? fmt::format("{} has a number beyond the range of a double", what_)
                              : fmt::format("{} has a number beyond the range of a double in '{}'",
                                            what_, key),
                  std::move(param));
    }
    return fail(fmt::format("{} is not valid JSON: {}", what_, without_tag(ex.what())), "",
                /*not_json=*/true);
  }

  const std::optional<JsonParseFailure>& failure() const { return failure_; }

 private:
  // A container opens: nesting beyond kMaxJsonDepth is refused.
  bool enter() {
    if (++depth_ > kMaxJsonDepth)
      return fail(fmt::format("{} nests JSON deeper than {} levels", what_, kMaxJsonDepth));
    return true;
  }
  bool fail(std::string message, std::string param = "", bool not_json = false) {
    if (!failure_) failure_ = JsonParseFailure{std::move(message), std::move(param), not_json};
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::string_view what_;
  int depth_ = 0;
  // The keys seen so far in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open_objects_;
  std::string last_key_;  // the field a number that overflows belongs to
  std::string top_key_;   // the top-level object's field being parsed
  std::optional<JsonParseFailure> failure_;
};

}  // namespace

std::variant<json, JsonParseFailure> parse_strict_json(std::string_view text,
                                                       std::string_view what) {
  // Well-formed text (nearly every request) takes the fast path; anything
  // it declines is parsed again here, which accepts it or words the error.
  if (std::optional<json> fast = parse_json_fast_path(text, kMaxJsonDepth)) return std::move(*fast);
  json result;
  StrictSax sax(result, what);
  const bool ok = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true);
  if (sax.failure()) return *sax.failure();
  if (!ok) return JsonParseFailure{fmt::format("{} is not valid JSON", what), "", true};
  return result;
}

}  // namespace pagoda
