#include "engine/guided/structural_tag.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "engine/guided/json_schema_regex.h"

namespace pagoda::guided {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& what) { throw StructuralTagError(what); }

const char* json_type(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "number";
  }
}

std::string string_at(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) fail(fmt::format("{}.{} is required", where, key));
  if (!it->is_string())
    fail(fmt::format("{}.{} must be a string, got {}", where, key, json_type(*it)));
  return it->get<std::string>();
}

StructuralTagItem parse_item(const json& v, const std::string& where) {
  if (!v.is_object())
    fail(fmt::format("{} must be an object with 'begin', 'schema' and 'end', got {}", where,
                     json_type(v)));
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "begin" && it.key() != "schema" && it.key() != "end")
      fail(fmt::format("{} has no field '{}' (it takes 'begin', 'schema' and 'end')", where,
                       it.key()));
  StructuralTagItem item;
  item.begin = string_at(v, "begin", where);
  item.end = string_at(v, "end", where);
  const auto s = v.find("schema");
  if (s != v.end() && !s->is_null()) {
    if (!s->is_object() && !s->is_boolean())
      fail(
          fmt::format("{}.schema must be a JSON schema (an object), got {}", where, json_type(*s)));
    item.schema = s->dump();
  }
  return item;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

// The trigger `begin` starts with (at most one: no trigger is a prefix of
// another), or -1.
int trigger_of(const StructuralTag& tag, std::string_view begin) {
  for (size_t k = 0; k < tag.triggers.size(); ++k)
    if (starts_with(begin, tag.triggers[k])) return static_cast<int>(k);
  return -1;
}

[[noreturn]] void too_large(const StructuralTag& tag, const std::exception& e) {
  throw StructuralTagError(
      fmt::format("the structural tag is too large ({} structures' schemas together): {}",
                  tag.structures.size(), e.what()));
}

std::string json_quoted(std::string_view s) { return json(std::string(s)).dump(); }

}  // namespace

StructuralTag parse_structural_tag(const json& v) {
  if (!v.is_object())
    fail(fmt::format("a structural tag must be an object with 'structures' and 'triggers', got {}",
                     json_type(v)));
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "type") {
      if (!it->is_string() || it->get<std::string>() != "structural_tag")
        fail(fmt::format("type must be \"structural_tag\", got {}", it->dump()));
    } else if (k == "format") {
      fail(
          "the 'format' form of structural tags (xgrammar's StructuralTag) is not supported; give "
          "'structures' and 'triggers'");
    } else if (k != "structures" && k != "triggers") {
      fail(fmt::format("a structural tag has no field '{}' (it takes 'structures' and 'triggers')",
                       k));
    }
  }
  StructuralTag tag;
  const auto structures = v.find("structures");
  if (structures == v.end() || structures->is_null()) fail("structures is required");
  if (!structures->is_array() || structures->empty())
    fail("structures must be a non-empty list of {begin, schema, end} objects");
  const auto triggers = v.find("triggers");
  if (triggers == v.end() || triggers->is_null()) fail("triggers is required");
  if (!triggers->is_array() || triggers->empty())
    fail("triggers must be a non-empty list of strings");
  for (size_t i = 0; i < triggers->size(); ++i) {
    const json& t = (*triggers)[i];
    if (!t.is_string()) fail(fmt::format("triggers[{}] must be a string, got {}", i, json_type(t)));
    std::string s = t.get<std::string>();
    if (s.empty()) fail(fmt::format("triggers[{}] is empty", i));
    if (std::find(tag.triggers.begin(), tag.triggers.end(), s) == tag.triggers.end())
      tag.triggers.push_back(std::move(s));
  }
  for (size_t a = 0; a < tag.triggers.size(); ++a)
    for (size_t b = 0; b < tag.triggers.size(); ++b)
      if (a != b && starts_with(tag.triggers[b], tag.triggers[a]))
        fail(fmt::format("trigger {} is a prefix of trigger {} (triggers may not overlap so)",
                         json_quoted(tag.triggers[a]), json_quoted(tag.triggers[b])));
  for (size_t i = 0; i < structures->size(); ++i) {
    const std::string where = fmt::format("structures[{}]", i);
    StructuralTagItem item = parse_item((*structures)[i], where);
    if (trigger_of(tag, item.begin) < 0)
      fail(fmt::format("{}.begin {} starts with none of the triggers", where,
                       json_quoted(item.begin)));
    tag.structures.push_back(std::move(item));
  }
  for (const std::string& t : tag.triggers) {
    bool used = false;
    for (const auto& s : tag.structures) used = used || starts_with(s.begin, t);
    if (!used) fail(fmt::format("trigger {} begins none of the structures", json_quoted(t)));
  }
  return tag;
}

StructuralTag parse_structural_tag(std::string_view text) {
  json v = json::parse(text, nullptr, false);
  if (v.is_discarded()) fail("the structural tag is not valid JSON");
  return parse_structural_tag(v);
}

std::string structural_tag_json(const StructuralTag& tag) {
  json structures = json::array();
  for (const auto& s : tag.structures)
    structures.push_back({{"begin", s.begin},
                          {"schema", s.schema.empty() ? json(nullptr) : json::parse(s.schema)},
                          {"end", s.end}});
  return json{{"structures", std::move(structures)}, {"triggers", tag.triggers}}.dump();
}

ByteDfa structural_tag_dfa(const StructuralTag& tag, std::string_view whitespace_pattern,
                           bool disable_additional_properties) {
  if (tag.structures.empty() || tag.triggers.empty())
    throw StructuralTagError("a structural tag needs structures and triggers");
  // Aho-Corasick automaton of the triggers: trie nodes, each byte's goto
  // and the trigger that fires on reaching the node (the longest trigger
  // that is a suffix of the node's string), else -1.
  std::vector<std::array<int32_t, 256>> go(1);
  go[0].fill(-1);
  std::vector<int32_t> fires{-1};
  for (size_t k = 0; k < tag.triggers.size(); ++k) {
    int32_t n = 0;
    for (char ch : tag.triggers[k]) {
      const auto b = static_cast<uint8_t>(ch);
      if (go[static_cast<size_t>(n)][b] < 0) {
        go[static_cast<size_t>(n)][b] = static_cast<int32_t>(go.size());
        go.emplace_back().fill(-1);
        fires.push_back(-1);
      }
      n = go[static_cast<size_t>(n)][b];
    }
    fires[static_cast<size_t>(n)] = static_cast<int32_t>(k);
  }
  std::vector<int32_t> fail_link(go.size(), 0);
  std::deque<int32_t> queue;
  for (auto& t : go[0]) {
    if (t < 0) {
      t = 0;
    } else {
      queue.push_back(t);  // depth 1: fails to the root
    }
  }
  while (!queue.empty()) {
    const auto u = static_cast<size_t>(queue.front());
    queue.pop_front();
    const auto f = static_cast<size_t>(fail_link[u]);
    if (fires[u] < 0) fires[u] = fires[f];  // f is nearer the root: already final
    for (size_t b = 0; b < 256; ++b) {
      const int32_t v = go[u][b];
      if (v < 0) {
        go[u][b] = go[f][b];
      } else {
        fail_link[static_cast<size_t>(v)] = go[f][b];
        queue.push_back(v);
      }
    }
  }

  NfaBuilder nfa;
  const int32_t accept = nfa.add_state();
  std::vector<int32_t> scan(go.size());
  for (auto& s : scan) s = nfa.add_state();
  std::vector<int32_t> dispatch(tag.triggers.size());
  for (auto& d : dispatch) d = nfa.add_state();
  for (size_t n = 0; n < go.size(); ++n) {
    if (fires[n] >= 0) {  // a trigger is complete: a structure follows
      nfa.add_epsilon(scan[n], dispatch[static_cast<size_t>(fires[n])]);
      continue;
    }
    nfa.add_epsilon(scan[n], accept);  // free text may end here
    for (int lo = 0; lo < 256;) {
      int hi = lo;
      while (hi + 1 < 256 && go[n][static_cast<size_t>(hi + 1)] == go[n][static_cast<size_t>(lo)])
        ++hi;
      nfa.add_edge(scan[n], static_cast<uint8_t>(lo), static_cast<uint8_t>(hi),
                   scan[static_cast<size_t>(go[n][static_cast<size_t>(lo)])]);
      lo = hi + 1;
    }
  }
  for (size_t i = 0; i < tag.structures.size(); ++i) {
    const StructuralTagItem& s = tag.structures[i];
    const int k = trigger_of(tag, s.begin);
    if (k < 0)
      throw StructuralTagError(fmt::format(
          "structures[{}].begin {} starts with none of the triggers", i, json_quoted(s.begin)));
    int32_t cur = nfa.add_literal(
        dispatch[static_cast<size_t>(k)],
        std::string_view(s.begin).substr(tag.triggers[static_cast<size_t>(k)].size()));
    try {
      cur = nfa.add_regex(
          cur, json_schema_to_regex(s.schema.empty() ? "{}" : s.schema, whitespace_pattern,
                                    disable_additional_properties));
    } catch (const std::invalid_argument& e) {  // SchemaError, RegexError (whitespace, size)
      if (nfa.full()) too_large(tag, e);        // all the schemas together
      throw StructuralTagError(fmt::format("structures[{}].schema: {}", i, e.what()));
    }
    cur = nfa.add_literal(cur, s.end);
    nfa.add_epsilon(cur, scan[0]);
  }
  try {
    return nfa.build(scan[0], accept);
  } catch (const RegexError& e) {
    too_large(tag, e);
  }
}

}  // namespace pagoda::guided
