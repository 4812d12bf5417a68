// Tool calls out of a chat completion whose output guided decoding forced
// into JSON (tool_choice "required" or a named function; the schemas are
// server/tool_choice_schema.h), as vLLM's serving_chat.py turns it into
// calls (v0.10 / v0.11, chat_completion_stream_generator and
// chat_completion_full_generator):
//   named      the whole output is the arguments of one call to the named
//              function. Streamed: the first delta carries index 0, id,
//              type "function", the name and the first text as arguments;
//              each later text is an arguments fragment. Non-streamed: the
//              same text whole.
//   required   the output is a JSON array of {"name": NAME, "parameters":
//              ARGS} objects; each is a call, index = its position.
//              Streamed: a call's first delta (index, id, type, name,
//              arguments so far) goes out once its "parameters" value has
//              begun, later deltas carry the rest of ARGS' text verbatim
//              (the item's own "}", the "," between items and the "]" are
//              not arguments). Non-streamed (final_calls): the text parsed
//              as a whole, arguments = Python's json.dumps(ARGS,
//              ensure_ascii=False) (python_json.h), as vLLM re-serializes
//              them; text that is not such a list (output cut short by
//              max_tokens) is vLLM's 400 there.
// The caller's response rules (vLLM's): content "" non-streamed, nothing
// streamed; finish_reason "tool_calls" streamed once a call went out, the
// engine's ("stop", "length") non-streamed.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace pagoda {

struct ForcedToolChoice {
  enum class Kind { kNone, kNamed, kRequired };
  Kind kind = Kind::kNone;
  std::string name;  // kNamed: the function
};

class ForcedToolCalls {
 public:
  // make_id: a new call's id (vLLM: "chatcmpl-tool-<32 hex>").
  ForcedToolCalls(ForcedToolChoice choice, std::function<std::string()> make_id);
  ~ForcedToolCalls();
  ForcedToolCalls(const ForcedToolCalls&) = delete;
  ForcedToolCalls& operator=(const ForcedToolCalls&) = delete;

  // The next piece of generated text (any split): the calls' deltas it
  // completes (content is always empty).
  ToolParseResult feed(std::string_view text);
  // Whether a call's first delta went out.
  bool called() const;
  // The non-streamed calls (index, id, name, whole arguments), ids those the
  // stream gave. kRequired: nullopt, with *error set, when the whole text is
  // not a list of {"name": string, "parameters": object|null} objects.
  std::optional<std::vector<ToolCallDelta>> final_calls(std::string* error) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
