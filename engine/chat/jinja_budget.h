// RenderScope: the per-render bounds on what a chat template's expressions
// build, beside the interpreter's statement, output and time bounds
// (jinja_interpreter.h). A single expression can allocate without running
// a statement — ("a" * 60000000) | list, [0] * 60000000, x | join over a
// list holding one big string many times, tojson(indent=...) of a deep
// value — so every string, list and dict a render makes is charged to the
// current thread's scope, and each operation that can multiply its inputs
// (repetition, join, replace, indent, tojson, repr, split) checks its room
// before or while it grows. The limits are far above what real templates
// need (their output is at most the 16 MiB output bound) and far below what
// would hurt a server (several renders run at once on the preprocessing
// pool).
//
// Also what jinja2's ImmutableSandboxedEnvironment gets from Python for free:
// namespaces (the only mutable values) may form cycles (ns.self = ns); the
// scope clears every namespace made during the render when it ends, so no
// cycle outlives it, and nesting of lists and dicts is bounded
// (kMaxNesting, like Python's recursion limit) so printing, comparing or
// freeing a value never recurses without bound.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::jinja {

class Value;

// Throws ChatTemplateError "chat template rendering exceeded its time limit
// of N ms" for the current scope's limit N (the interpreter's check too).
[[noreturn]] void time_limit_error();
// Adds `bytes` to the current render's total (no-op outside a render).
// Throws ChatTemplateError once the total passes RenderScope::kMaxBytes or
// the render's deadline has passed.
void charge(size_t bytes);
// Counts `units` of work that builds nothing (a comparison: 1, plus 1 per
// 4 KiB of string compared or searched); past the render's deadline it
// throws ChatTemplateError (checked once per 4096 units, so at most a few
// milliseconds of work pass unchecked). No-op outside a render.
void tick(size_t units = 1);
// Throws ChatTemplateError when `bytes` more would pass kMaxBytes (for a
// result being built, before it is charged). No-op outside a render.
void check_room(size_t bytes);
// Registers a namespace's entries to be cleared when the render ends.
void track_namespace(const std::shared_ptr<std::vector<std::pair<std::string, Value>>>& entries);

class RenderScope {
 public:
  // Cumulative bytes of strings, lists and dicts one render may build
  // (temporaries included: a bound on work as well as on memory).
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  // Lists and dicts nested deeper than this are an error when built.
  static constexpr int kMaxNesting = 500;

  // Installs this scope as the calling thread's current one (scopes nest:
  // the previous one is restored by the destructor). `time_limit` after
  // construction, charge() and tick() fail the render (checked every few
  // thousand calls), so a long expression is bounded in time as a long loop
  // of statements is (time_limit_error()).
  explicit RenderScope(std::chrono::milliseconds time_limit);
  ~RenderScope();
  RenderScope(const RenderScope&) = delete;
  RenderScope& operator=(const RenderScope&) = delete;
  bool past_deadline() const { return std::chrono::steady_clock::now() > deadline_; }

 private:
  friend void charge(size_t bytes);
  friend void tick(size_t units);
  friend void time_limit_error();
  friend void check_room(size_t bytes);
  friend void track_namespace(const std::shared_ptr<std::vector<std::pair<std::string, Value>>>&);
  RenderScope* previous_;
  std::chrono::milliseconds time_limit_;
  std::chrono::steady_clock::time_point deadline_;
  size_t used_ = 0;
  size_t work_ = 0;           // tick() units so far
  size_t next_check_ = 4096;  // work_ at which the deadline is checked next
  std::vector<std::shared_ptr<std::vector<std::pair<std::string, Value>>>> namespaces_;
};

}  // namespace pagoda::jinja
