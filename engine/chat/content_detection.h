// Whether a chat template reads a message's content as a list of parts
// (vLLM's "auto" chat template content format, _detect_content_format in
// vllm/renderers/hf.py), found on the parsed template, not by rendering it.
#pragma once
#include "engine/chat/jinja_ast.h"

namespace pagoda::jinja {

// True when some `for` loop iterates a message's content: `m['content']` or
// `m.content` (also through a filter, a test or a slice), where m is the
// target of a `for m in X` loop and X is `messages`, or a variable set from
// it (`{% set loop_messages = messages[1:] %}`, transitively), again also
// through a filter, a test or a slice. vLLM's rule, as its Jinja2 AST walk
// finds it (anywhere in the template: macros and branches included); a shape
// its walk rejects (a loop over messages or their content with several
// targets, a namespace attribute set from messages) gives false, as vLLM
// falls back to "string" there.
bool iterates_message_content(const Body& body);

}  // namespace pagoda::jinja
