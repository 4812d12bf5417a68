// Streaming tool-call parsers (see tool_call_parser.h). One call object is
// scanned by CallScanner; the hermes and llama3_json drivers find where call
// objects are in the text.
#include "server/tool_call_parser.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "server/python_json.h"

namespace pagoda {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Length of the longest suffix of s that is a proper prefix of tag (text to
// hold back: it may be the start of the tag).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// Depth and string state of JSON text, one character at a time.
struct JsonTracker {
  int depth = 0;
  bool in_string = false;
  bool escape = false;
  bool started = false;
  // True when c closes the outermost container.
  bool feed(char c) {
    if (in_string) {
      if (escape)
        escape = false;
      else if (c == '\\')
        escape = true;
      else if (c == '"')
        in_string = false;
      return false;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
      started = true;
    } else if ((c == '}' || c == ']') && depth > 0) {
      return --depth == 0;
    }
    return false;
  }
};

enum class Prefix { kNeedMore, kMatch, kMismatch };

// A JSON string at s[i] == '"': its decoded value and the index after it;
// kNeedMore when it is not closed yet.
Prefix read_string(std::string_view s, size_t& i, std::string& value) {
  size_t j = i + 1;
  bool escape = false;
  for (; j < s.size(); ++j) {
    if (escape)
      escape = false;
    else if (s[j] == '\\')
      escape = true;
    else if (s[j] == '"')
      break;
  }
  if (j >= s.size()) return Prefix::kNeedMore;
  ordered_json v = ordered_json::parse(s.substr(i, j + 1 - i), nullptr, /*allow_exceptions=*/false);
  if (!v.is_string()) return Prefix::kMismatch;
  value = v.get<std::string>();
  i = j + 1;
  return Prefix::kMatch;
}

// Whether raw starts with `{"name": <string>, "<args key>": ` (any JSON
// whitespace between): the form a call's name can be streamed from. On
// kMatch, name is set and the arguments start at raw.size() or later.
Prefix match_call_prefix(std::string_view raw, bool accept_parameters, std::string& name) {
  size_t i = 0;
  auto skip = [&] {
    while (i < raw.size() && is_ws(raw[i])) ++i;
    return i < raw.size();
  };
  auto expect = [&](char c) -> Prefix {
    if (!skip()) return Prefix::kNeedMore;
    if (raw[i] != c) return Prefix::kMismatch;
    ++i;
    return Prefix::kMatch;
  };
  auto string = [&](std::string& out) -> Prefix {
    if (!skip()) return Prefix::kNeedMore;
    if (raw[i] != '"') return Prefix::kMismatch;
    return read_string(raw, i, out);
  };
  std::string key, value;
  Prefix p;
  if ((p = expect('{')) != Prefix::kMatch) return p;
  if ((p = string(key)) != Prefix::kMatch) return p;
  if (key != "name") return Prefix::kMismatch;
  if ((p = expect(':')) != Prefix::kMatch) return p;
  if ((p = string(value)) != Prefix::kMatch) return p;
  if (value.empty()) return Prefix::kMismatch;  // no name: not a call (finish() decides)
  if ((p = expect(',')) != Prefix::kMatch) return p;
  if ((p = string(key)) != Prefix::kMatch) return p;
  if (key != "arguments" && !(accept_parameters && key == "parameters")) return Prefix::kMismatch;
  if ((p = expect(':')) != Prefix::kMatch) return p;
  name = std::move(value);
  return Prefix::kMatch;
}

// What a CallScanner found in one piece: the name (once) and arguments text.
struct CallPiece {
  bool has_name = false;
  std::string name;
  std::string arguments;
};

// One call object, streamed: the name as soon as the object's prefix is
// {"name": "...", "arguments": , then the arguments' text as it comes. Any
// other shape is held until finish() and parsed whole.
class CallScanner {
 public:
  explicit CallScanner(bool accept_parameters) : accept_parameters_(accept_parameters) {}

  void feed(char c, CallPiece& out) {
    raw_ += c;
    if (outer_.feed(c)) complete_ = true;
    if (mode_ == Mode::kUndecided) {
      std::string name;
      switch (match_call_prefix(raw_, accept_parameters_, name)) {
        case Prefix::kMatch:
          mode_ = Mode::kStreaming;
          out.has_name = true;
          out.name = std::move(name);
          break;
        case Prefix::kMismatch:
          mode_ = Mode::kWhole;
          break;
        case Prefix::kNeedMore:
          break;
      }
      return;
    }
    if (mode_ == Mode::kStreaming) arguments_char(c, out);
  }

  // The outermost JSON value closed (an object: the call's end).
  bool complete() const { return complete_; }
  bool streaming() const { return mode_ == Mode::kStreaming; }
  const std::string& raw() const { return raw_; }

  // The end of the call's text: true when it is a call (a streamed one whose
  // whole text is a JSON object, or the whole text a call object: its name
  // and arguments go to out). A streamed call cut off before its object
  // closed, or not valid JSON, is no call (vLLM's json.loads fails).
  bool finish(CallPiece& out) {
    if (mode_ == Mode::kStreaming) {
      if (!complete_ || !ordered_json::accept(raw_)) return false;
      if (extra_)
        spdlog::warn("tool call: text after the arguments is not part of the call: {:.200}", raw_);
      return true;
    }
    ordered_json v = ordered_json::parse(raw_, nullptr, /*allow_exceptions=*/false);
    if (!v.is_object()) return false;
    auto name = v.find("name");
    auto args = v.find("arguments");
    if (args == v.end() && accept_parameters_) args = v.find("parameters");
    if (name == v.end() || !name->is_string() || name->get_ref<const std::string&>().empty() ||
        args == v.end())
      return false;
    out.has_name = true;
    out.name = name->get<std::string>();
    out.arguments += python_json_dumps(*args);
    return true;
  }

 private:
  enum class Mode { kUndecided, kStreaming, kWhole };
  enum class Args { kBefore, kContainer, kString, kScalar, kAfter };

  void arguments_char(char c, CallPiece& out) {
    switch (args_) {
      case Args::kBefore:
        if (is_ws(c)) return;
        if (c == '{' || c == '[') {
          args_ = Args::kContainer;
          value_.feed(c);
        } else if (c == '"') {
          args_ = Args::kString;
        } else if (c == '}') {  // no value: the object closed
          args_ = Args::kAfter;
          return;
        } else {
          args_ = Args::kScalar;
        }
        out.arguments += c;
        return;
      case Args::kContainer:
        out.arguments += c;
        if (value_.feed(c)) args_ = Args::kAfter;
        return;
      case Args::kString:
        out.arguments += c;
        if (string_escape_)
          string_escape_ = false;
        else if (c == '\\')
          string_escape_ = true;
        else if (c == '"')
          args_ = Args::kAfter;
        return;
      case Args::kScalar:
        if (!is_ws(c) && c != ',' && c != '}' && c != ']') {
          out.arguments += c;
          return;
        }
        args_ = Args::kAfter;
        [[fallthrough]];
      case Args::kAfter:
        if (!is_ws(c) && !(c == '}' && complete_)) extra_ = true;
        return;
    }
  }

  bool accept_parameters_;
  std::string raw_;
  JsonTracker outer_;
  JsonTracker value_;
  bool complete_ = false;
  bool extra_ = false;
  bool string_escape_ = false;
  Mode mode_ = Mode::kUndecided;
  Args args_ = Args::kBefore;
};

}  // namespace

std::optional<ToolParserKind> tool_parser_from_name(std::string_view name) {
  if (name == "hermes") return ToolParserKind::kHermes;
  if (name == "llama3_json") return ToolParserKind::kLlama3Json;
  return std::nullopt;
}

const char* tool_parser_name(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::kHermes:
      return "hermes";
    case ToolParserKind::kLlama3Json:
      return "llama3_json";
    case ToolParserKind::kNone:
      break;
  }
  return "";
}

struct ToolCallParser::Impl {
  ToolParserKind kind;
  std::function<std::string()> make_id;
  int calls = 0;        // indexes taken: calls started, withdrawn ones included
  int found = 0;        // calls that parsed (called())
  std::string pending;  // text not yet decided on
  // Whitespace after a call (llama3_json: and ";"), dropped unless content follows.
  std::string held_space;
  std::unique_ptr<CallScanner> call;  // the call being scanned
  bool call_named = false;            // its first delta went out
  // llama3_json: whether the output is calls (decided by its first bytes),
  // and, once a call ended, whether the rest is content.
  enum class Llama { kUndecided, kCalls, kContent } llama = Llama::kUndecided;

  // Appends a scanner's piece as deltas of the current call.
  void emit(CallPiece& piece, ToolParseResult& r) {
    if (piece.has_name) {
      r.calls.push_back({calls - 1, make_id(), std::move(piece.name), std::move(piece.arguments)});
      call_named = true;
    } else if (!piece.arguments.empty() && call_named) {
      r.calls.push_back({calls - 1, "", "", std::move(piece.arguments)});
    }
    piece = CallPiece{};
  }

  void start_call(bool accept_parameters) {
    call = std::make_unique<CallScanner>(accept_parameters);
    call_named = false;
    ++calls;
  }

  // The current call's text ended; `prefix`/`suffix`: its tags, shown as
  // content when it was no call (withdrawn when its first delta went out).
  void end_call(ToolParseResult& r, std::string_view prefix, std::string_view suffix) {
    CallPiece piece;
    if (call->finish(piece)) {
      emit(piece, r);
      ++found;
    } else {
      std::string text;
      text.reserve(prefix.size() + call->raw().size() + suffix.size());
      text += prefix;
      text += call->raw();
      text += suffix;
      if (call_named) {
        r.withdrawn.push_back({calls - 1, r.content.size(), std::move(text)});
      } else {
        --calls;
        r.content += text;
      }
    }
    call.reset();
    call_named = false;
  }

  void content(std::string_view text, ToolParseResult& r) {
    if (found == 0) {
      r.content += text;
      return;
    }
    // After a block: trailing whitespace is held until something else
    // follows (dropped before the next block and at the end).
    held_space += text;
    size_t end = held_space.size();
    while (end > 0 && is_ws(held_space[end - 1])) --end;
    r.content.append(held_space, 0, end);
    held_space.erase(0, end);
  }

  void hermes(bool at_end, ToolParseResult& r) {
    while (!pending.empty()) {
      if (!call) {
        const size_t open = pending.find(kHermesOpen);
        if (open == std::string::npos) {
          const size_t keep = at_end ? 0 : partial_tag_suffix(pending, kHermesOpen);
          content(std::string_view(pending).substr(0, pending.size() - keep), r);
          pending.erase(0, pending.size() - keep);
          return;
        }
        content(std::string_view(pending).substr(0, open), r);
        held_space.clear();  // whitespace between blocks
        pending.erase(0, open + kHermesOpen.size());
        start_call(/*accept_parameters=*/false);
        continue;
      }
      const size_t close = pending.find(kHermesClose);
      const size_t upto = close != std::string::npos ? close
                          : at_end                   ? pending.size()
                                   : pending.size() - partial_tag_suffix(pending, kHermesClose);
      CallPiece piece;
      for (size_t i = 0; i < upto; ++i) {
        call->feed(pending[i], piece);
        if (piece.has_name) emit(piece, r);  // the name first, alone
      }
      emit(piece, r);  // the arguments text of this piece
      pending.erase(0, upto);
      if (close == std::string::npos) {
        if (at_end) end_call(r, kHermesOpen, "");
        return;
      }
      pending.erase(0, kHermesClose.size());
      end_call(r, kHermesOpen, kHermesClose);
    }
    if (at_end && call) end_call(r, kHermesOpen, "");
  }

  void llama3(bool at_end, ToolParseResult& r) {
    if (llama == Llama::kUndecided) {
      if (pending.empty()) return;
      if (pending.front() == '{') {
        llama = Llama::kCalls;
      } else if (pending.rfind(kPythonTag, 0) == 0) {
        llama = Llama::kCalls;
        pending.erase(0, kPythonTag.size());
      } else if (!at_end && kPythonTag.substr(0, pending.size()) == pending) {
        return;  // may still become <|python_tag|>
      } else {
        llama = Llama::kContent;
      }
    }
    if (llama == Llama::kContent) {
      r.content += pending;
      pending.clear();
      return;
    }
    size_t i = 0;
    CallPiece piece;
    for (; i < pending.size(); ++i) {
      const char c = pending[i];
      if (!call) {
        if (is_ws(c) || c == ';') {  // between calls
          held_space += c;
          continue;
        }
        if (c != '{') {  // not a call: the rest is content
          llama = Llama::kContent;
          r.content += held_space;
          r.content += pending.substr(i);
          held_space.clear();
          pending.clear();
          return;
        }
        held_space.clear();
        start_call(/*accept_parameters=*/true);
      }
      call->feed(c, piece);
      if (piece.has_name) emit(piece, r);  // the name first, alone
      if (call->complete()) {
        emit(piece, r);
        end_call(r, "", "");
      }
    }
    if (call) emit(piece, r);
    pending.clear();
    if (at_end && call) end_call(r, "", "");
  }
};

ToolCallParser::ToolCallParser(ToolParserKind kind, std::function<std::string()> make_id)
    : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  impl_->make_id = std::move(make_id);
}

ToolCallParser::~ToolCallParser() = default;

ToolParseResult ToolCallParser::feed(std::string_view text) {
  ToolParseResult r;
  impl_->pending += text;
  if (impl_->kind == ToolParserKind::kHermes)
    impl_->hermes(false, r);
  else if (impl_->kind == ToolParserKind::kLlama3Json)
    impl_->llama3(false, r);
  else {
    r.content = std::move(impl_->pending);
    impl_->pending.clear();
  }
  return r;
}

ToolParseResult ToolCallParser::finish() {
  ToolParseResult r;
  if (impl_->kind == ToolParserKind::kHermes)
    impl_->hermes(true, r);
  else if (impl_->kind == ToolParserKind::kLlama3Json)
    impl_->llama3(true, r);
  r.content += impl_->pending;
  impl_->pending.clear();
  impl_->held_space.clear();
  return r;
}

bool ToolCallParser::called() const { return impl_->found > 0; }

}  // namespace pagoda
