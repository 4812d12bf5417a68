// ForcedToolCalls (see forced_tool_calls.h). kRequired scans the array one
// character at a time: the item objects' keys and values are followed at
// the item's level; a "name" value is kept whole, a "parameters" value's
// text is the call's arguments (any nesting, strings with escapes).
#include "server/forced_tool_calls.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "server/python_json.h"

namespace pagoda {

namespace {

using nlohmann::ordered_json;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct Item {
  std::string id;
  std::string name_raw;  // the name's JSON string text, quotes included
  bool name_done = false;
  std::string args;  // the "parameters" value's text so far
  size_t args_sent = 0;
  bool params_started = false;
  bool header_sent = false;
  bool ended = false;
};

std::string decode_name(const std::string& raw) {
  ordered_json v = ordered_json::parse(raw, nullptr, false);
  return v.is_string() ? v.get<std::string>() : raw;
}

}  // namespace

struct ForcedToolCalls::Impl {
  enum class St {
    kBeforeArray,
    kInArray,
    kKeyOrEnd,
    kKey,
    kColon,
    kValueStart,
    kValue,
    kAfterValue,
    kEnd,
    kBroken
  };
  enum class VKind { kString, kContainer, kScalar };

  ForcedToolChoice choice;
  std::function<std::string()> make_id;
  std::string text;  // everything fed
  // kNamed
  std::string named_id;
  // kRequired
  St st = St::kBeforeArray;
  std::vector<Item> items;
  std::string key;
  bool key_esc = false;
  VKind vkind = VKind::kScalar;
  int vdepth = 0;
  bool vin_str = false;
  bool vesc = false;

  std::string* sink() {
    if (items.empty()) return nullptr;
    if (key == "name") return &items.back().name_raw;
    if (key == "parameters") return &items.back().args;
    return nullptr;
  }
  void put(char c) {
    if (std::string* s = sink()) s->push_back(c);
  }
  void value_end() {
    if (key == "name" && !items.empty()) items.back().name_done = true;
    st = St::kAfterValue;
  }

  void step(char c) {
    switch (st) {
      case St::kBeforeArray:
        if (c == '[')
          st = St::kInArray;
        else if (!is_ws(c))
          st = St::kBroken;
        return;
      case St::kInArray:
        if (c == '{') {
          items.emplace_back();
          st = St::kKeyOrEnd;
        } else if (c == ']') {
          st = St::kEnd;
        } else if (!is_ws(c) && c != ',') {
          st = St::kBroken;
        }
        return;
      case St::kKeyOrEnd:
        if (c == '"') {
          key.clear();
          key_esc = false;
          st = St::kKey;
        } else if (c == '}') {
          items.back().ended = true;
          st = St::kInArray;
        } else if (!is_ws(c) && c != ',') {
          st = St::kBroken;
        }
        return;
      case St::kKey:
        if (key_esc) {
          key.push_back(c);
          key_esc = false;
        } else if (c == '\\') {
          key.push_back(c);
          key_esc = true;
        } else if (c == '"') {
          st = St::kColon;
        } else {
          key.push_back(c);
        }
        return;
      case St::kColon:
        if (c == ':')
          st = St::kValueStart;
        else if (!is_ws(c))
          st = St::kBroken;
        return;
      case St::kValueStart:
        if (is_ws(c)) return;
        if (key == "parameters") items.back().params_started = true;
        vesc = false;
        vin_str = false;
        vdepth = 0;
        if (c == '"') {
          vkind = VKind::kString;
        } else if (c == '{' || c == '[') {
          vkind = VKind::kContainer;
          vdepth = 1;
        } else {
          vkind = VKind::kScalar;
        }
        put(c);
        st = St::kValue;
        return;
      case St::kValue:
        if (vkind == VKind::kScalar && (is_ws(c) || c == ',' || c == '}')) {
          value_end();
          step(c);
          return;
        }
        put(c);
        if (vkind == VKind::kString || vin_str) {
          if (vesc) {
            vesc = false;
          } else if (c == '\\') {
            vesc = true;
          } else if (c == '"') {
            if (vkind == VKind::kString)
              value_end();
            else
              vin_str = false;
          }
        } else if (vkind == VKind::kContainer) {
          if (c == '"') {
            vin_str = true;
          } else if (c == '{' || c == '[') {
            ++vdepth;
          } else if ((c == '}' || c == ']') && --vdepth == 0) {
            value_end();
          }
        }
        return;
      case St::kAfterValue:
        if (c == ',') {
          st = St::kKeyOrEnd;
        } else if (c == '}') {
          items.back().ended = true;
          st = St::kInArray;
        } else if (!is_ws(c)) {
          st = St::kBroken;
        }
        return;
      case St::kEnd:
        if (!is_ws(c)) st = St::kBroken;
        return;
      case St::kBroken:
        return;
    }
  }

  // The deltas the items' progress allows: a call's first delta once its
  // name is whole and its arguments began (or it ended without them), then
  // the arguments' new text.
  void collect(std::vector<ToolCallDelta>& out) {
    for (size_t i = 0; i < items.size(); ++i) {
      Item& it = items[i];
      if (!it.header_sent) {
        if (!it.name_done || !(it.params_started || it.ended)) continue;
        it.header_sent = true;
        it.id = make_id();
        out.push_back({static_cast<int>(i), it.id, decode_name(it.name_raw), it.args});
        it.args_sent = it.args.size();
      } else if (it.args.size() > it.args_sent) {
        out.push_back({static_cast<int>(i), "", "", it.args.substr(it.args_sent)});
        it.args_sent = it.args.size();
      }
    }
  }
};

ForcedToolCalls::ForcedToolCalls(ForcedToolChoice choice, std::function<std::string()> make_id)
    : impl_(std::make_unique<Impl>()) {
  impl_->choice = std::move(choice);
  impl_->make_id = std::move(make_id);
}

ForcedToolCalls::~ForcedToolCalls() = default;

ToolParseResult ForcedToolCalls::feed(std::string_view text) {
  Impl& m = *impl_;
  ToolParseResult r;
  m.text.append(text);
  if (m.choice.kind == ForcedToolChoice::Kind::kNamed) {
    if (m.named_id.empty()) {
      m.named_id = m.make_id();
      r.calls.push_back({0, m.named_id, m.choice.name, std::string(text)});
    } else if (!text.empty()) {
      r.calls.push_back({0, "", "", std::string(text)});
    }
    return r;
  }
  for (char c : text) m.step(c);
  m.collect(r.calls);
  return r;
}

bool ForcedToolCalls::called() const {
  if (impl_->choice.kind == ForcedToolChoice::Kind::kNamed) return !impl_->named_id.empty();
  for (const Item& it : impl_->items)
    if (it.header_sent) return true;
  return false;
}

std::optional<std::vector<ToolCallDelta>> ForcedToolCalls::final_calls(std::string* error) const {
  const Impl& m = *impl_;
  std::vector<ToolCallDelta> calls;
  if (m.choice.kind == ForcedToolChoice::Kind::kNamed) {
    calls.push_back({0, m.named_id.empty() ? m.make_id() : m.named_id, m.choice.name, m.text});
    return calls;
  }
  auto bad = [&](std::string why) -> std::optional<std::vector<ToolCallDelta>> {
    if (error)
      *error = fmt::format(
          "tool_choice \"required\": the output is not a list of tool calls "
          "([{{\"name\": ..., \"parameters\": {{...}}}}, ...]): {}",
          why);
    return std::nullopt;
  };
  const ordered_json list = ordered_json::parse(m.text, nullptr, false);
  if (list.is_discarded())
    return bad(m.text.empty() ? "it is empty" : "it is not complete JSON (cut short?)");
  if (!list.is_array()) return bad("it is not a JSON array");
  for (size_t i = 0; i < list.size(); ++i) {
    const ordered_json& item = list[i];
    if (!item.is_object()) return bad(fmt::format("item {} is not an object", i));
    auto name = item.find("name");
    if (name == item.end() || !name->is_string())
      return bad(fmt::format("item {} has no string \"name\"", i));
    ordered_json params = item.contains("parameters") ? item["parameters"] : ordered_json();
    if (!params.is_null() && !params.is_object())
      return bad(fmt::format("item {}'s \"parameters\" is not an object", i));
    std::string id = i < m.items.size() && m.items[i].header_sent ? m.items[i].id : m.make_id();
    calls.push_back(
        {static_cast<int>(i), std::move(id), name->get<std::string>(), python_json_dumps(params)});
  }
  return calls;
}

}  // namespace pagoda
