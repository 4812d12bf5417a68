#include "server/strict_json.h"

#include <set>
#include <vector>

#include <fmt/format.h>

namespace pagoda {

using nlohmann::json;

namespace {

struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

// nlohmann's what() without its "[json.exception.parse_error.101] " tag.
std::string parse_error_text(const json::parse_error& e) {
  std::string s = e.what();
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

}  // namespace

std::variant<json, JsonParseFailure> parse_strict_json(std::string_view text,
                                                       std::string_view what) {
  // The keys seen so far in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open_objects;
  std::string last_key;  // the field a number that overflows belongs to
  std::string top_key;   // the top-level object's field being parsed
  try {
    return json::parse(text, [&open_objects, &last_key, &top_key](
                                 int depth, json::parse_event_t event, json& parsed) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      switch (event) {
        case json::parse_event_t::object_start:
          open_objects.emplace_back();
          break;
        case json::parse_event_t::key:
          last_key = parsed.get<std::string>();
          if (open_objects.size() == 1) top_key = last_key;
          if (!open_objects.empty() && !open_objects.back().insert(last_key).second)
            throw DuplicateKey{last_key};
          break;
        case json::parse_event_t::object_end:
          if (!open_objects.empty()) open_objects.pop_back();
          break;
        default:
          break;
      }
      return true;
    });
  } catch (const TooDeep&) {
    return JsonParseFailure{fmt::format("{} nests JSON deeper than {} levels", what, kMaxJsonDepth),
                            ""};
  } catch (const DuplicateKey& d) {
    std::string key = d.key.size() > 100 ? d.key.substr(0, 100) + "..." : d.key;
    return JsonParseFailure{
        fmt::format("{} has the key '{}' twice in one JSON object (each key may appear once)", what,
                    key),
        ""};
  } catch (const json::parse_error& e) {
    return JsonParseFailure{fmt::format("{} is not valid JSON: {}", what, parse_error_text(e)), ""};
  } catch (const json::out_of_range&) {
    // nlohmann refuses a number beyond double range (1e999) while parsing:
    // the client's input, so a 400 naming the field it was in.
    std::string key = last_key.size() > 100 ? last_key.substr(0, 100) + "..." : last_key;
    std::string param = top_key.size() > 100 ? "" : top_key;
    return JsonParseFailure{
        key.empty()
            ? fmt::format("{} has a number beyond the range of a double", what)
            : fmt::format("{} has a number beyond the range of a double in '{}'", what, key),
        std::move(param)};
  }
}

}  // namespace pagoda
