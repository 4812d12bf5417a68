// Jinja2 tree-walking interpreter: renders a parsed template with a set of
// global variables, following the Jinja2 template designer documentation
// ("Variables", "Assignments", "Scoping Behavior", "Macros", "Call",
// "For" with the loop variable, "Loop Controls") and the behaviour of
// ImmutableSandboxedEnvironment with jinja2.Undefined (lenient undefined
// values that render as "" and fail on any other use).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/chat/jinja_ast.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {

struct Frame {
  Dict vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter {
 public:
  // Renders `body` with `globals` (plus the builtin globals range, namespace,
  // dict). Throws ChatTemplateError on runtime errors. `body` must outlive
  // the call.
  std::string render(const Body& body, Dict globals);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, std::string& out, const FramePtr& frame);
  Flow exec(const Stmt& s, std::string& out, const FramePtr& frame);
  void exec_for(const Stmt& s, std::string& out, const FramePtr& frame);
  void assign(const Stmt& s, Value v, const FramePtr& frame);
  Value make_macro(const Stmt& s, const FramePtr& frame);
  Value call_macro(const Stmt& s, const FramePtr& def_frame, const CallArgs& args);
  Value eval(const Expr& e, const FramePtr& frame);
  Value eval_call(const Expr& e, const FramePtr& frame, const Value* caller);
  CallArgs eval_args(const Expr& e, size_t first, const FramePtr& frame);
  Value lookup(const std::string& name, const FramePtr& frame) const;

  static constexpr int kMaxMacroDepth = 100;  // recursion bound, like Python's stack limit
  // Bounds on one render, so a runaway template (an operator's
  // --chat-template) fails its request instead of holding a network thread
  // and memory: statements executed, and bytes in any output buffer. Real
  // chat templates take ~10-50 statements per message and render a prompt
  // of at most a few MB (max_model_len tokens); the step bound is reached in
  // about a second on one core. And wall time: a render that has run for
  // kMaxRenderTime fails (checked every kTimeCheckSteps statements), so a
  // preprocessing thread is never held for more than a fraction of a
  // second whatever the template or the messages (the server also bounds
  // the number of messages, --max-chat-messages).
  static constexpr int64_t kMaxSteps = 2'000'000;
  static constexpr size_t kMaxOutputBytes = size_t{16} << 20;
  static constexpr std::chrono::milliseconds kMaxRenderTime{500};
  static constexpr int64_t kTimeCheckSteps = 256;
  void check_budget(const std::string& out);
  int macro_depth_ = 0;
  int64_t steps_ = 0;
  const RenderScope* scope_ = nullptr;  // the current render's (its deadline)
  Value filter_input_;  // operand of the innermost filter of a filter block / block set
};

// Python iteration of a value for `for` and filters: list items, dict keys,
// string characters; Undefined iterates as empty. Throws for other types.
List iterate(const Value& v);

}  // namespace pagoda::jinja
