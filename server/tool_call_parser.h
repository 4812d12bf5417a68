// Tool calls in a chat completion's text, as vLLM's tool parsers find them
// (vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py and
// llama_tool_parser.py; --tool-call-parser hermes | llama3_json):
//   hermes       Qwen2 / Qwen2.5 / Hermes: each call is
//                <tool_call>{"name": NAME, "arguments": ARGS}</tool_call>
//                anywhere in the text;
//   llama3_json  Llama 3.1 JSON: the whole output is one or more
//                {"name": NAME, "parameters"|"arguments": ARGS} objects
//                separated by ";", optionally after <|python_tag|>; an output
//                that does not start with "{" or <|python_tag|> is content.
// The parser is fed the text in pieces as it is generated (any split, one
// byte at a time included) and returns, for each piece, the content to show
// and the tool-call deltas in OpenAI's streaming shape: a call's first delta
// carries its index, id, type "function" and name (arguments ""), later ones
// only index and an arguments fragment (vLLM's DeltaToolCall order).
// Joined, the deltas of a call are the whole call; a non-streamed response
// is the same deltas merged, so both agree byte for byte.
//
// Arguments are streamed as the model wrote them (the JSON text of ARGS,
// verbatim; vLLM re-serializes them with json.dumps, which for Qwen's and
// Llama's output is the same text). A call object whose keys come in
// another order (arguments first) is held until it is complete, then sent
// as one delta with ARGS dumped from the parsed value. A block that is not
// a call (invalid JSON, no non-empty string "name") is content, tags included, as
// vLLM's non-streamed parser returns it; so is a block the end of the output
// cut off before its JSON object closed (an unterminated block whose JSON is
// complete is a call, as vLLM's regex reads it). When such a block's name
// had already been streamed, the result's `withdrawn` says so (below).
// A withdrawn call's index stays taken (a stream's deltas never merge two
// calls); the index of a block no delta went out for is reused. Hermes: content is the text outside
// the blocks; whitespace between blocks and at the end after one is dropped
// (vLLM's non-streamed content is the text before the first block).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

enum class ToolParserKind { kNone, kHermes, kLlama3Json };

// "hermes" / "llama3_json" (vLLM's names); nullopt for another name.
std::optional<ToolParserKind> tool_parser_from_name(std::string_view name);
const char* tool_parser_name(ToolParserKind kind);  // "" for kNone

// One tool-call delta. id/name: set (non-empty) in a call's first delta only.
struct ToolCallDelta {
  int index = 0;  // the call's position in this choice (0, 1, ...)
  std::string id;
  std::string name;
  std::string arguments;  // a fragment of the arguments' JSON text
};

// A call whose first delta went out but whose text, once it ended, was no
// call: cut off by the end of the output (max_tokens, a stop string) before
// its JSON object closed, or not valid JSON. vLLM's non-streamed parser
// returns such a block as content (json.loads fails), so the non-streamed
// response drops the call (every delta of `index`) and shows `text` (tags
// included) as content at byte `offset` of the result's content. A stream
// cannot take back the deltas it sent: it sends nothing more for the call,
// and the call no longer counts for called() (finish_reason "tool_calls").
struct WithdrawnCall {
  int index = 0;
  size_t offset = 0;
  std::string text;
};

struct ToolParseResult {
  std::string content;               // text to show as content
  std::vector<ToolCallDelta> calls;  // in order
  std::vector<WithdrawnCall> withdrawn;
};

class ToolCallParser {
 public:
  // make_id: a new call's id (vLLM: "chatcmpl-tool-<32 hex>").
  ToolCallParser(ToolParserKind kind, std::function<std::string()> make_id);
  ~ToolCallParser();
  ToolCallParser(const ToolCallParser&) = delete;
  ToolCallParser& operator=(const ToolCallParser&) = delete;

  // The next piece of generated text (UTF-8, any split).
  ToolParseResult feed(std::string_view text);
  // The end of the output: what was held back (a partial tag, an unfinished
  // block: content unless it parses as a call).
  ToolParseResult finish();
  // Whether any call was found so far (finish_reason "tool_calls"); a
  // withdrawn call does not count.
  bool called() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
